// Package secrets is keygate's versioned secret store, with the semantics
// of Vault's KV version 2 engine: each path holds numbered versions of a
// JSON object, with metadata (maximum versions kept, check-and-set
// required, delete-version-after, custom metadata), soft delete and
// undelete, and destroy, which erases a version's ciphertext for good.
// Every version is sealed with AES-256-GCM under its tenant's data key
// (package tenantkey), with the tenant, the path and the version bound as
// additional data, so the store never holds a value in the clear and a
// ciphertext moved to another row does not open. A path's metadata (its
// settings, custom metadata and each version's times) is sealed the same
// way, bound to the tenant and the path. What the store shows is the
// tenant, the path, the version numbers and the rows' times and sizes;
// not a value, nor the custom metadata.
//
// [Engine] implements [Service] over the store (store.Secrets), with
// optimistic concurrency: a write reads the path, decides, and stores
// against the revision it read; a writer that lost the race reads again
// and decides again, so a write with cas that lost gets ErrCASMismatch
// and one without lands as the next version. The HTTP API in Vault's
// shapes (package kvapi) uses the engine through [Service].
package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Errors callers branch on with errors.Is (ErrGone with errors.As on
// *GoneError).
var (
	// ErrNotFound: no such path, or no such version of it.
	ErrNotFound = errors.New("secret not found")
	// ErrCASMismatch: the write's cas is not the path's current version
	// (Vault: "check-and-set parameter did not match the current version").
	ErrCASMismatch = errors.New("check-and-set parameter did not match the current version")
	// ErrCASRequired: the path or the mount requires cas and the write
	// gave none (Vault: "check-and-set parameter required for this call").
	ErrCASRequired = errors.New("check-and-set parameter required for this call")
	// ErrInvalid wraps every refusal of bad input (a path, a value that is
	// not a JSON object, metadata out of range); the text says what.
	ErrInvalid = errors.New("invalid request")
	// ErrTooLarge wraps a value over MaxValueBytes. Custom metadata over
	// its limits is ErrInvalid, as Vault answers it (400).
	ErrTooLarge = errors.New("too large")
	// ErrSealed: the root key is sealed, so no data key can be opened.
	ErrSealed = errors.New("sealed")
)

// GoneError is a read of a version that was deleted or destroyed: Vault
// answers 404 with the version's metadata, which Meta holds.
type GoneError struct{ Meta VersionMeta }

func (e *GoneError) Error() string {
	if e.Meta.Destroyed {
		return "secret version destroyed"
	}
	return "secret version deleted"
}

// Is makes a GoneError also ErrNotFound.
func (e *GoneError) Is(target error) bool { return target == ErrNotFound }

// Documented limits.
const (
	MaxPathBytes       = 512     // a path, in bytes
	MaxValueBytes      = 1 << 20 // a version's data, as JSON
	MaxCustomMetadata  = 64      // custom_metadata entries (as Vault)
	MaxCustomKeyBytes  = 128     // a custom_metadata key (as Vault)
	MaxCustomValueByte = 512     // a custom_metadata value (as Vault)
	DefaultMaxVersions = 10      // kept when neither the path nor the mount sets max_versions (as Vault)
)

// VersionMeta is one version's metadata.
type VersionMeta struct {
	Version      int
	CreatedTime  time.Time
	DeletionTime time.Time // zero: not deleted; in the future: deleted then (delete_version_after)
	Destroyed    bool
}

// Written is what a write or a patch made: the new version's metadata, and
// the path's custom metadata as the write stored it (Vault answers it with
// the version), so that the caller need not read the path again.
type Written struct {
	VersionMeta
	CustomMetadata map[string]string // nil: none
}

// Secret is a version read: its data (a JSON object) and metadata.
type Secret struct {
	Data           json.RawMessage
	Meta           VersionMeta
	CustomMetadata map[string]string // the path's (Vault returns it with every read); nil: none
}

// Metadata is a path's metadata and every version's (Vault's
// metadata/:path read).
type Metadata struct {
	Path               string
	CASRequired        bool
	MaxVersions        int           // 0: the mount's (then DefaultMaxVersions)
	DeleteVersionAfter time.Duration // 0: never (or the mount's)
	CustomMetadata     map[string]string
	CreatedTime        time.Time
	UpdatedTime        time.Time
	CurrentVersion     int // 0: no version yet (metadata written first)
	OldestVersion      int
	Versions           []VersionMeta // ascending
}

// MetadataUpdate changes a path's metadata; a nil field is left as it is.
// CustomMetadata replaces the whole map when not nil (an empty map clears
// it), as Vault's POST does; PatchMetadata merges instead.
type MetadataUpdate struct {
	MaxVersions        *int
	CASRequired        *bool
	DeleteVersionAfter *time.Duration
	CustomMetadata     map[string]string
}

// MountConfig is the mount's defaults for every path of a tenant (Vault's
// secret/config).
type MountConfig struct {
	MaxVersions        int
	CASRequired        bool
	DeleteVersionAfter time.Duration
}

// Service is what the HTTP API asks of the engine. Every method works
// inside one tenant: nothing of another tenant is ever found. A path is
// checked by ValidPath first (ErrInvalid).
type Service interface {
	// Read returns version (0: the current one) of path. A deleted or
	// destroyed version is a *GoneError; no such path or version
	// ErrNotFound.
	Read(ctx context.Context, tenant, path string, version int) (*Secret, error)
	// Write stores data (a JSON object) as a new version, if cas (when
	// not nil) is the current version (0: the path must have none):
	// ErrCASMismatch, ErrCASRequired. Versions beyond max_versions are
	// dropped, oldest first.
	Write(ctx context.Context, tenant, path string, data json.RawMessage, cas *int) (Written, error)
	// Patch applies a JSON merge patch (RFC 7396) to the current version
	// and stores the result as a new version; a path without a live
	// current version is ErrNotFound.
	Patch(ctx context.Context, tenant, path string, patch json.RawMessage, cas *int) (Written, error)
	// Subkeys returns the version's data with every leaf replaced by null,
	// to depth (0: all).
	Subkeys(ctx context.Context, tenant, path string, version, depth int) (json.RawMessage, VersionMeta, error)
	// Metadata returns the path's metadata; ErrNotFound when it has none.
	Metadata(ctx context.Context, tenant, path string) (*Metadata, error)
	// SetMetadata changes the path's metadata, creating it if absent.
	SetMetadata(ctx context.Context, tenant, path string, u MetadataUpdate) error
	// PatchMetadata is SetMetadata with CustomMetadata merged into the
	// stored map (a key set to "" is removed) rather than replacing it;
	// a path without metadata is ErrNotFound.
	PatchMetadata(ctx context.Context, tenant, path string, u MetadataUpdate) error
	// DeleteMetadata erases the path: its metadata and every version. A
	// path that does not exist is no error.
	DeleteMetadata(ctx context.Context, tenant, path string) error
	// Delete soft-deletes versions (none: the current one); versions that
	// do not exist or are destroyed are skipped, as Vault does.
	Delete(ctx context.Context, tenant, path string, versions []int) error
	// Undelete clears the deletion of versions.
	Undelete(ctx context.Context, tenant, path string, versions []int) error
	// Destroy erases the versions' ciphertext for good.
	Destroy(ctx context.Context, tenant, path string, versions []int) error
	// List returns the names directly under the folder prefix ("" or
	// ending in '/'), sorted: a path's last segment, and a folder's with
	// a trailing '/'. An empty folder is ErrNotFound (Vault: 404).
	List(ctx context.Context, tenant, prefix string) ([]string, error)
	// Config returns the tenant's mount configuration.
	Config(ctx context.Context, tenant string) (MountConfig, error)
	// SetConfig replaces it.
	SetConfig(ctx context.Context, tenant string, c MountConfig) error
}
