// Package transit is the crypto engine of keygate's Vault-compatible transit
// service: named, versioned keys and the operations Vault's transit secrets
// engine offers on them — encrypt, decrypt, rewrap, datakey, sign, verify,
// hmac, verify-hmac, hash, random, import (BYOK) and export — with Vault's
// key types, parameters, rules and text formats, so that a Vault client
// works unchanged and a Vault ciphertext decrypts here.
//
// The package has no HTTP, no storage and no keyring. A [Key] is an
// immutable snapshot of a named key (Vault's policy): its [Config] and its
// [Version]s. The storage layer keeps the configuration ([MarshalConfig])
// and each version ([MarshalVersion], sealed by the keyring) and assembles
// snapshots with [LoadKey]; changes ([Engine.Rotate], [Engine.Configure],
// [Engine.Trim], [Engine.ImportVersion]) return a new snapshot to store and
// swap in atomically. An [Engine] runs the operations; it holds only the
// random source, the clock, a bounded cache of derived keys and the
// private-key worker pool.
//
// # Formats
//
// Ciphertexts, signatures and HMACs are Vault's text: "vault:v" + version +
// ":" + standard base64 of the payload. For the AEAD key types the payload
// is nonce‖ciphertext‖tag (AES-256-GCM and AES-128-GCM with 96-bit nonces,
// ChaCha20-Poly1305, XChaCha20-Poly1305); for RSA keys, RSA-OAEP with
// SHA-256. Signatures marshaled as jws are unpadded base64url.
//
// # Security properties
//
//   - Decryption reads the version from the text and uses exactly that
//     version: a version below min_decryption_version is [ErrVersionTooOld],
//     one newer than the key's latest is [ErrUnknownVersion] (re-read the key
//     and retry once). No version is ever tried in turn.
//   - Texts are parsed strictly ([ParseCiphertext]): one spelling per value,
//     canonical base64, no legacy "v0".
//   - HMAC verification compares in constant time; key import unwrapping
//     (RSA-OAEP, then AES-KWP, package kwp) fails with one error whatever
//     failed.
//   - Key material is unexported and prints as its type and number. Data
//     keys and exports come back as [Secret], which prints "[redacted]".
//   - Key material this package keeps (a version's raw bytes and HMAC key,
//     the words of its private integers, a derived key's signing and nonce
//     keys) lives in buffers that overwrite themselves once nothing refers
//     to any part of them: the finalizer is on the buffer's own allocation,
//     never on a struct that holds it. The copies that crypto/* keeps out
//     of reach are not overwritten, only freed by the GC: an AEAD's key
//     schedule (crypto/aes) or key (chacha20poly1305), the HMAC pads,
//     crypto/rsa's precomputed key, and the scalars ECDSA and Ed25519
//     expand for each signature. An operation holding a slice of the bytes keeps
//     them intact, so a trim, a deletion or a derived key's eviction during
//     the operation cannot zero them under it (which would give away a
//     private key, or make convergent nonces HMAC(0, plaintext)). New key
//     material goes through newKeyBytes, takeKeyBytes or ownWords (wipe.go);
//     nothing else overwrites key material that an operation may hold.
//   - Derived keys are HKDF-SHA256 of the version's key with the context
//     (Vault's kdf hkdf_sha256), cached by (version, context) in a cache
//     bounded by entries; long contexts are never cached. Trim drops the
//     trimmed versions' derived keys, [Engine.ForgetKey] a deleted key's,
//     and [Engine.ForgetDerived] all of them (when the node seals).
//   - Convergent encryption is Vault's version 3 (the nonce is an HMAC of the
//     plaintext under a derived key), byte-compatible with Vault. Unlike
//     Vault, it refuses associated data, which would reuse a nonce across
//     different associated data.
//   - The random source and the clock are injected ([Options]).
//
// # Errors
//
// Every failure is an [*Error] whose [Reason] is a short machine-readable
// name (malformed, unknown_version, version_too_old, decryption_failed,
// unsupported, busy, ...); callers branch with errors.Is against the
// sentinels such as [ErrUnknownVersion], and Reason.UserError tells a 4xx
// from a 5xx.
//
// # Speed
//
// Each version builds its cipher.AEAD once and RSA keys are precomputed
// once. [Engine.SealRaw] and [Engine.OpenRaw] are the binary paths;
// [Engine.AppendEncrypt] and [Engine.AppendDecrypt] append or read the text
// in the caller's buffer. With room in the buffer, none of them allocates
// for a non-derived AEAD key (TestEncryptAllocations). Batches spread over
// the cores in chunks, in order, with an error per item.
//
// # Sharing
//
// Every asymmetric operation (signing and verification, RSA encryption and
// decryption, generating an asymmetric key, import unwrapping: whatever
// costs at least 40 AES-GCM encryptions) runs on a fixed number of
// workers, one fewer than the cores by default so that one stays for the
// rest of the process. A worker goes to the tenant that has been charged least for what
// it ran, then to the least charged principal within it (see [Caller]),
// each operation charged its cost: a flood waits behind itself, and another
// caller's operation waits for at most the operations in progress. Each
// item of a batch takes its own turn. A tenant, and a principal, may have
// only so many requests in progress; beyond that its next fails at once
// with [ErrBusy], and nobody else's does. AEAD and HMAC operations, and
// making their keys, never wait for a worker; an rsa-4096 key's
// generation holds one for about a second. A batch is refused with [ErrOverBudget], before any
// of it is done, when its items cost more than the budget
// ([DefaultMaxBatchCost]; an AES-GCM encryption costs 1, an rsa-4096
// signature 25,000).
package transit
