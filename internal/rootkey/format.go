package rootkey

import "encoding/binary"

// Ciphertext format, version 1. All fields have fixed sizes; integers are
// big-endian.
//
//	offset  size   field
//	0       1      format version (1)
//	1       4      root key ID
//	5       12     wrap nonce
//	17      48     data key, AES-256-GCM-encrypted under the root key (32 + 16-byte tag)
//	65      12     payload nonce
//	77      n+16   plaintext, AES-256-GCM-encrypted under the data key (n + 16-byte tag)
//
// The wrap's associated data is bytes 0–4 (version and root key ID), so
// neither can be changed without the unwrap failing. The payload's
// associated data is the caller's aad alone: the version is already bound
// through the data key, and Rewrap must be able to replace bytes 1–64
// without touching the payload.
const (
	formatV1 = 1

	offKeyID        = 1
	offWrapNonce    = offKeyID + 4                      // 5
	offWrappedKey   = offWrapNonce + nonceSize          // 17
	offPayloadNonce = offWrappedKey + KeySize + tagSize // 65
	offPayload      = offPayloadNonce + nonceSize       // 77
	wrappedKeyEnd   = offPayloadNonce                   // end of the wrapped data key
	dataKeyEnd      = offWrappedKey + KeySize           // end of the data key before wrapping
	wrapAADEnd      = offWrapNonce                      // version + key ID
	maxCiphertext   = MaxPlaintextSize + Overhead       // the largest ciphertext Decrypt accepts
)

// Overhead is what Encrypt adds to a plaintext: len(ciphertext) is
// len(plaintext) + Overhead, 93 bytes in format version 1.
const Overhead = 93

// Overhead must equal the layout's fixed part (a negative uint constant
// does not compile).
const _ = uint(Overhead-(offPayload+tagSize)) + uint((offPayload+tagSize)-Overhead)

// MaxPlaintextSize caps what one Encrypt takes: 1 GiB, well inside GCM's
// 64 GiB per-message limit and far beyond any record keygate stores.
const MaxPlaintextSize = 1 << 30

// parseV1 checks the version and length of ct and returns the root key ID
// it names.
func parseV1(ct []byte) (KeyID, error) {
	if len(ct) == 0 {
		return 0, malformed("empty")
	}
	if ct[0] != formatV1 {
		return 0, &VersionError{Version: ct[0]}
	}
	if len(ct) < Overhead {
		return 0, malformed("truncated")
	}
	if len(ct) > maxCiphertext {
		return 0, malformed("too long")
	}
	return KeyID(binary.BigEndian.Uint32(ct[offKeyID:])), nil
}

// CiphertextKeyID returns the ID of the root key ct is wrapped under,
// without decrypting anything. A sweep after Rotate uses it to skip records
// already under the current key.
func CiphertextKeyID(ct []byte) (KeyID, error) { return parseV1(ct) }

type malformedError string

func malformed(why string) error { return malformedError(why) }

func (e malformedError) Error() string { return "malformed ciphertext: " + string(e) }

// Is makes errors.Is(err, ErrMalformed) hold.
func (e malformedError) Is(target error) bool { return target == ErrMalformed }
