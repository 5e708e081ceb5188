// Package rootkey holds keygate's root key and encrypts under it everything
// keygate stores that is secret: the token service's signing keys and each
// tenant's data key, under which the tenant's transit keys are sealed
// (package tenantkey, below this one, keeps those).
//
// # Root keys
//
// A root key is 32 random bytes ([Key]) from one of three sources:
//
//   - a key file, raw or base64, that group and others cannot read
//     ([LoadKeyFile]; [GenerateKeyFile] makes one for development);
//   - an environment variable holding it in base64 ([Options].KeyEnv);
//   - an unseal passphrase stretched by Argon2id ([InitPassphrase],
//     [Keyring.UnsealPassphrase]). The parameters (by default 64 MiB, 3
//     passes, 4 lanes; see [DefaultArgon2]), a random 16-byte salt and a
//     key-check value live in a versioned JSON header in the data directory
//     (keyring.json, see [Header]), so a wrong passphrase is reported as
//     [ErrWrongPassphrase] instead of producing garbage. The header's
//     parameters are capped (see [ReadHeader]): it holds no secret and may
//     be edited, so it cannot be trusted with the node's memory.
//
// A keyring with a header accepts one root key only, however it is given:
// the key that authenticates the header's key-check value
// ([Header.CheckKey], [ErrWrongKey]). The 32-bit [KeyID] names a key; it
// never authenticates one.
//
// A Key is opaque and not comparable with ==; [Key.Equal] compares
// in constant time, and every fmt verb and slog print only its [KeyID], an
// HMAC-derived 32-bit name that reveals nothing usable about the key.
//
// # Sealing
//
// A [Keyring] is sealed until it is given a root key (by [New] with a key
// source, [Keyring.Unseal] or [Keyring.UnsealPassphrase]). While sealed,
// every operation returns [ErrSealed], which the HTTP layer maps to 503.
// A key from an untrusted caller (an unseal request) goes through
// [Keyring.UnsealVerified] or [Keyring.UnsealPassphraseVerified]: it is
// checked completely, against the header's key-check value and then by a
// [Verifier] that sees it in a detached keyring, before the keyring holds
// it, so a wrong key is never in use, not even for a moment.
// The root key never leaves process memory: this package writes it nowhere
// (except the new file of GenerateKeyFile), never logs or returns it, and
// keeps no raw copy once the AES key schedule and the HKDF pseudorandom key
// that [Keyring.DeriveKey] expands are made. [Keyring.Seal]
// drops both; Go gives no way to zero memory inside crypto/aes,
// so they are erased only in builds with GOEXPERIMENT=runtimesecret, where
// key handling runs under runtime/secret.Do. Key files, passphrase buffers
// and derived keys the package handles are zeroed after use; strings (such
// as an environment variable's value) cannot be.
//
// # Derived keys
//
// [Keyring.DeriveKey] derives a key for one purpose from the current root
// key with HKDF-SHA256 under a label naming the purpose (the audit log's
// checkpoint signing key and HMAC key are two): every node holding the
// root key derives the same keys, so they need no distribution and are
// never stored. A derived key reveals nothing about the root key or about
// keys of other labels. Deriving needs the keyring unsealed.
//
// # Envelope encryption
//
// [Keyring.Encrypt] draws a fresh 256-bit data key for every call, encrypts
// the plaintext under it with AES-256-GCM, and wraps the data key under the
// current root key with AES-256-GCM. The result is self-describing: a
// format version byte, the root key's [KeyID], the wrapped data key and its
// nonce, the payload nonce, and the payload with its tag ([Overhead] bytes
// in all; the layout is in format.go). Decrypt dispatches on the version and
// key ID, never by trial decryption, and anything malformed, truncated, of
// an unknown version or under an unknown key is a typed error, never a
// panic.
//
// The associated data passed to Encrypt binds the ciphertext to its record
// (for example "signing-key:<kid>"): a ciphertext copied into another record
// fails with [ErrDecrypt]. The version byte and key ID are authenticated as
// the wrap's associated data.
//
// Root keys rotate without downtime: [Keyring.Rotate] adds a new current
// key and keeps the old ones for decryption, [Keyring.Rewrap] moves one
// ciphertext's data key under the current key without touching its payload,
// [CiphertextKeyID] tells which records still need it, and [Keyring.Retire]
// drops an old key once none do.
//
// # Security properties and limits
//
// Confidentiality and integrity of the plaintext, and integrity of the
// associated data, hold as long as the root key is secret; a ciphertext
// reveals the plaintext's length, the root key ID, and nothing else.
// Nonces are 96 random bits from the injected source ([Options].Rand,
// crypto/rand by default). A data key encrypts exactly one payload, so the
// payload nonce cannot repeat under its key. The root key wraps one data
// key per Encrypt or Rewrap; with random nonces the chance of any repeat
// stays below 2⁻³² for the first 2³² wraps (NIST SP 800-38D §8.3), so
// rotate a root key before it has wrapped 2³² data keys. The package does
// not detect rollback (an older ciphertext of the same record put back):
// put a record version into the associated data where that matters.
package rootkey
