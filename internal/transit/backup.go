package transit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
)

// Backups (Vault's backup/:name and restore). A backup is keygate's own
// format, as Vault's is its own: base64 of a JSON document
//
//	{"format":1,"config":{…the stored configuration…},
//	 "versions":["<base64 of MarshalVersion>", …]}
//
// holding the key's configuration and every version it keeps, from
// min_available_version (or 1) to the latest, oldest first. The key
// material in it is in plaintext: that is what allow_plaintext_backup
// consents to, and why a backup is only made of a key that is also
// exportable. Whoever holds a backup holds the key.

const (
	backupFormat = 1
	// MaxBackupBytes bounds a backup's base64 text: enough for thousands
	// of versions of the largest key type.
	MaxBackupBytes = 32 << 20
)

type backupJSON struct {
	Format   int             `json:"format"`
	Config   json.RawMessage `json:"config"`
	Versions []string        `json:"versions"`
}

// oldestKept is the oldest version a key keeps: min_available_version, or
// 1 for a key never trimmed.
func (c Config) oldestKept() int { return max(1, c.MinAvailableVersion) }

// Backup returns the backup of k (base64 text), which must hold every
// version the key keeps (see Key.WithVersions). Only a key with both
// exportable and allow_plaintext_backup set is backed up, with Vault's
// errors otherwise.
func (e *Engine) Backup(k *Key) (Secret, error) {
	switch {
	case !k.cfg.Exportable:
		return Secret{}, newError(ReasonNotExportable, "exporting is disallowed on the policy")
	case !k.cfg.AllowPlaintextBackup:
		return Secret{}, newError(ReasonNotExportable, "plaintext backup is disallowed on the policy")
	case k.base != k.cfg.oldestKept():
		return Secret{}, versionError(ReasonVersionNotLoaded, "the versions below min_decryption_version are not all given", k.cfg.oldestKept())
	}
	cfg, err := MarshalConfig(k.cfg)
	if err != nil {
		return Secret{}, err
	}
	j := backupJSON{Format: backupFormat, Config: cfg, Versions: make([]string, 0, len(k.versions))}
	for _, v := range k.versions {
		b, err := MarshalVersion(v)
		if err != nil {
			return Secret{}, err
		}
		j.Versions = append(j.Versions, base64.StdEncoding.EncodeToString(b))
		clear(b)
	}
	// The versions' base64 strings cannot be cleared (Go strings are
	// immutable); nothing references them once this returns.
	doc, err := json.Marshal(j)
	if err != nil {
		return Secret{}, wrapError(ReasonInternal, "encoding the backup", err)
	}
	defer clear(doc)
	return newSecret(base64.StdEncoding.AppendEncode(nil, doc)), nil
}

var errBackup = newError(ReasonInvalidRequest, "invalid backup")

func badBackup(detail string) *Error {
	return newError(ReasonInvalidRequest, "invalid backup: "+detail)
}

// ParseBackup reads a backup that Backup wrote and returns the key in it,
// checked as a key loaded from storage is: the configuration and every
// version must parse strictly and agree, and the versions must run from
// the oldest the key keeps to its latest. Anything else is
// ReasonInvalidRequest; nothing in the error repeats the input.
func ParseBackup(text []byte) (*Key, error) {
	if len(text) > MaxBackupBytes {
		return nil, errInputTooLarge
	}
	doc, err := base64.StdEncoding.AppendDecode(nil, text)
	if err != nil {
		return nil, badBackup("not base64")
	}
	defer clear(doc)
	j, err := decodeBackup(doc)
	if err != nil {
		return nil, err
	}
	cfg, err := UnmarshalConfig(j.Config)
	if err != nil {
		return nil, badBackup("the configuration does not parse")
	}
	if want := cfg.LatestVersion - cfg.oldestKept() + 1; len(j.Versions) != want {
		return nil, badBackup("the versions do not run from the oldest kept to the latest")
	}
	vs := make([]*Version, 0, len(j.Versions))
	for _, s := range j.Versions {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, badBackup("a version is not base64")
		}
		v, err := UnmarshalVersion(b)
		clear(b)
		if err != nil {
			return nil, badBackup("a version does not parse")
		}
		if v.num != cfg.oldestKept()+len(vs) { // one spelling: oldest first, each once
			return nil, badBackup("the versions do not run from the oldest kept to the latest")
		}
		vs = append(vs, v)
	}
	k, err := LoadKey(cfg, vs...)
	if err != nil {
		return nil, badBackup("the versions do not agree with the configuration")
	}
	return k, nil
}

// decodeBackup decodes the JSON document strictly: no unknown or
// duplicate members, nothing after it, format 1.
func decodeBackup(doc []byte) (backupJSON, error) {
	var j backupJSON
	if hasDuplicateKeys(doc) {
		return j, errBackup
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return backupJSON{}, badBackup("not a keygate key backup")
	}
	if _, err := dec.Token(); err != io.EOF {
		return backupJSON{}, badBackup("not a keygate key backup")
	}
	if j.Format != backupFormat {
		return backupJSON{}, badBackup("unknown format")
	}
	return j, nil
}

// Renamed returns k under another name (a restore under a new name): the
// same configuration and versions.
func (k *Key) Renamed(name string) (*Key, error) {
	cfg := k.cfg
	cfg.Name = name
	return LoadKey(cfg, k.versions...)
}
