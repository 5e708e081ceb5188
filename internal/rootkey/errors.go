package rootkey

import (
	"errors"
	"fmt"
	"io/fs"
)

// Errors callers branch on with errors.Is. Every error the package returns
// wraps one of them, an I/O error (file system, random source), or reports
// a programming error such as two key sources given to New.
//
// [ErrSealed] means "try again once an operator has unsealed"; an HTTP
// front end maps it to 503. [ErrMalformed], [ErrUnsupportedVersion],
// [ErrUnknownKey] and [ErrDecrypt] are caused by the ciphertext: a client
// error when the client supplied it (transit), corruption or tampering when
// it came from the store.
var (
	// ErrSealed: the keyring holds no root key.
	ErrSealed = errors.New("sealed: the root key is not loaded")
	// ErrAlreadyUnsealed: Unseal was called on an unsealed keyring.
	ErrAlreadyUnsealed = errors.New("the root key is already unsealed")

	// ErrMalformed: the ciphertext is truncated or otherwise not in the
	// format.
	ErrMalformed = errors.New("malformed ciphertext")
	// ErrUnsupportedVersion: the ciphertext's format version is not one
	// this build reads. The error is a *VersionError.
	ErrUnsupportedVersion = errors.New("unsupported ciphertext version")
	// ErrUnknownKey: the root key the ciphertext names is not in the
	// keyring. The error is an *UnknownKeyError.
	ErrUnknownKey = errors.New("unknown root key")
	// ErrDecrypt: authentication failed. The ciphertext was modified, or
	// the associated data differs from the data it was encrypted with.
	ErrDecrypt = errors.New("message authentication failed")
	// ErrTooLarge: the plaintext is over MaxPlaintextSize.
	ErrTooLarge = errors.New("plaintext too large")

	// ErrKeyLength: key material is not KeySize bytes.
	ErrKeyLength = errors.New("a root key is 32 bytes")
	// ErrKeyEncoding: root key text (a key file or environment variable)
	// is not base64.
	ErrKeyEncoding = errors.New("root key is not base64")
	// ErrInsecureKeyFile: a key file is accessible by group or others. The
	// error is a *PermissionError.
	ErrInsecureKeyFile = errors.New("key file is accessible by group or others")
	// ErrNoKey: a root key value is the zero Key or was destroyed, or
	// a configured key source is empty.
	ErrNoKey = errors.New("no root key")
	// ErrKeyExists: the root key is already in the keyring.
	ErrKeyExists = errors.New("root key already in the keyring")
	// ErrCurrentKey: the current root key cannot be retired.
	ErrCurrentKey = errors.New("the current root key cannot be retired")

	// ErrWrongPassphrase: the passphrase does not derive the root key the
	// header's key-check value was made with.
	ErrWrongPassphrase = errors.New("wrong unseal passphrase")
	// ErrWrongKey: a root key given as such (not derived from a
	// passphrase) does not authenticate against the keyring header's
	// key-check value: it is not the key the header was made for.
	ErrWrongKey = errors.New("root key does not match the keyring header")
	// ErrWeakPassphrase: a new unseal passphrase is shorter than
	// MinPassphraseLen.
	ErrWeakPassphrase = errors.New("unseal passphrase too short")
	// ErrHeader: the keyring header file (keyring.json) is invalid or of
	// an unsupported version.
	ErrHeader = errors.New("invalid keyring header")
	// ErrNoHeader: passphrase unsealing needs Options.HeaderFile.
	ErrNoHeader = errors.New("no keyring header file configured")
)

// VersionError reports a ciphertext whose format version is unknown.
type VersionError struct {
	Version byte
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("unsupported ciphertext version %d", e.Version)
}

// Is makes errors.Is(err, ErrUnsupportedVersion) hold.
func (e *VersionError) Is(target error) bool { return target == ErrUnsupportedVersion }

// UnknownKeyError reports a ciphertext wrapped under a root key the
// keyring does not hold: a key retired too early, the wrong key file, or a
// corrupted key ID.
type UnknownKeyError struct {
	ID KeyID
}

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("root key %s is not in the keyring", e.ID)
}

// Is makes errors.Is(err, ErrUnknownKey) hold.
func (e *UnknownKeyError) Is(target error) bool { return target == ErrUnknownKey }

// PermissionError reports a key file that group or others may access.
type PermissionError struct {
	Path string
	Mode fs.FileMode
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("key file %s is accessible by group or others (mode %04o); run chmod 600 %s",
		e.Path, e.Mode.Perm(), e.Path)
}

// Is makes errors.Is(err, ErrInsecureKeyFile) hold.
func (e *PermissionError) Is(target error) bool { return target == ErrInsecureKeyFile }
