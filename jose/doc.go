// Package jose verifies and signs JSON Web Signatures in compact form (RFC 7515)
// carrying JWT claims (RFC 7519), and imports keys from JWK, JWKS (RFC 7517,
// 7518, 8037) and PEM. Its cryptography is Go's standard crypto packages, for
// RSA verification filippo.io/bigmod, the standalone form of the arithmetic
// inside crypto/rsa (see [RSAVerifier]), and for ES256 verification
// filippo.io/nistec, the standalone form of crypto/ecdsa's P-256 point
// arithmetic (see [P256Verifier]).
//
// # Security properties
//
// A [Key] is parsed once and bound to exactly one algorithm; a token whose
// header names another algorithm is refused before any cryptography runs, so
// "alg":"none" and RSA-public-key-as-HMAC-secret confusion cannot happen.
// [ParsePublicKeySet] binds each JWK of a published JWKS to one algorithm
// (its "alg", or the one its type and curve imply) and reports every JWK it
// leaves out, with a [SkipReason].
// Header members that point at keys (jku, x5u, jwk, x5c) are never used to find
// one. Input is checked strictly: a size limit before any decoding, strict
// base64url, strict JSON with duplicate member names refused. HMAC tags are
// compared in constant time. Weak keys (RSA under 2048 bits, HMAC keys shorter
// than the hash, points off the curve) are refused at import.
//
// # Errors
//
// Every rejection is an [*Error] whose [Reason] is a short machine-readable
// string (malformed, too_large, unsupported_alg, unknown_kid, bad_signature,
// expired, not_yet_valid, wrong_issuer, wrong_audience, revoked,
// missing_claim) for metrics and RFC 6750 responses. Callers branch with
// errors.Is against the sentinels such as [ErrExpired].
//
// # Speed
//
// [Parse] decodes the token once into a single buffer and never copies the
// input; claims strings are views into that buffer. Verifying a valid token
// with a known key allocates two objects beyond what the signature primitive
// itself allocates. An RSA key's modulus is prepared for its arithmetic once,
// when the key is made, rather than on every verification as crypto/rsa
// does: a 2048-bit RS256 or PS256 signature then verifies in about two
// thirds of crypto/rsa's time with no allocation, and exactly as crypto/rsa
// decides.
package jose
