package vaultapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/transit"
	"github.com/keygate/keygate/internal/transit/keystore"
)

// Key management: list, create, read, delete, config, rotate, trim, import,
// import_version, wrapping_key, export, backup and restore. These are rare next to the
// cryptographic operations; their answers are marshaled with
// encoding/json.

func marshal(v any) ([]byte, error) { return json.Marshal(v) }

func serveList(h *Handler, c *call) error {
	names, err := h.keys.List(c.ctx, c.tenant)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return errNothing // Vault answers an empty list 404 {"errors":[]}
	}
	return c.respond(map[string]any{"keys": names})
}

// keyTypeParam reads a key type as Vault's key write does: its exact name.
func keyTypeParam(c *call, def string) (transit.KeyType, error) {
	s, err := c.text("type", def)
	if err != nil {
		return 0, err
	}
	t, err := transit.ParseKeyType(s)
	if err != nil || t.String() != s {
		return 0, badRequest("unknown key type " + s)
	}
	return t, nil
}

// periodParam reads auto_rotate_period: 0, or at least an hour.
func periodParam(c *call) (time.Duration, bool, error) {
	m := c.req.get("auto_rotate_period")
	if m == nil {
		return 0, false, nil
	}
	d, err := m.seconds()
	if err != nil {
		return 0, true, err
	}
	if d != 0 && d < time.Hour {
		return 0, true, badRequest("auto rotate period must be 0 to disable or at least an hour")
	}
	return d, true, nil
}

func serveCreate(h *Handler, c *call) error {
	o := transit.CreateOptions{Caller: c.caller()}
	var err error
	if o.Type, err = keyTypeParam(c, "aes256-gcm96"); err != nil {
		return err
	}
	if err := c.flags(flag{"derived", &o.Derived}, flag{"convergent_encryption", &o.ConvergentEncryption},
		flag{"exportable", &o.Exportable}, flag{"allow_plaintext_backup", &o.AllowPlaintextBackup}); err != nil {
		return err
	}
	if o.AutoRotatePeriod, _, err = periodParam(c); err != nil {
		return err
	}
	if !o.Derived && o.ConvergentEncryption {
		return badRequest("convergent encryption requires derivation to be enabled")
	}
	if o.KeySize, err = c.integer("key_size", 0); err != nil {
		return err
	}
	if o.KeySize != 0 && o.Type != transit.HMAC {
		return badRequest("key_size is not valid for algorithm " + o.Type.String())
	}
	if o.KeySize != 0 && (o.KeySize < transit.HMACMinKeySize || o.KeySize > transit.HMACMaxKeySize) {
		return badRequest("invalid key_size " + itoa(o.KeySize))
	}
	if ref, _, _ := c.str("external_key_ref"); len(ref) > 0 {
		return badRequest("external keys are not supported")
	}
	k, created, err := h.keys.Create(c.ctx, c.tenant, c.args.name, o)
	if err != nil {
		return err
	}
	if !created {
		c.warnings = append(c.warnings, "key "+c.args.name+" already existed")
	}
	c.o.KeyVersion = k.LatestVersion()
	return h.describe(c, k, nil)
}

func serveRead(h *Handler, c *call) error {
	context, err := c.b64("context", 1, "context")
	if err != nil {
		return badRequest("failed to base64-decode context")
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	return h.describe(c, k, context)
}

// describe answers Vault's key read: the configuration, what the type
// supports, and per version its creation time (and for asymmetric keys its
// public key).
func (h *Handler) describe(c *call, k *transit.Key, context []byte) error {
	d, err := h.eng.Describe(k, context)
	if err != nil {
		return err
	}
	cfg := d.Config
	data := map[string]any{
		"name":                   cfg.Name,
		"type":                   cfg.Type.String(),
		"derived":                cfg.Derived,
		"deletion_allowed":       cfg.DeletionAllowed,
		"min_available_version":  cfg.MinAvailableVersion,
		"min_decryption_version": cfg.MinDecryptionVersion,
		"min_encryption_version": cfg.MinEncryptionVersion,
		"latest_version":         cfg.LatestVersion,
		"exportable":             cfg.Exportable,
		"allow_plaintext_backup": cfg.AllowPlaintextBackup,
		"supports_encryption":    d.Capabilities.Encryption,
		"supports_decryption":    d.Capabilities.Decryption,
		"supports_signing":       d.Capabilities.Signing,
		"supports_derivation":    d.Capabilities.Derivation,
		"auto_rotate_period":     int64(cfg.AutoRotatePeriod / time.Second),
		"imported_key":           cfg.Imported,
	}
	if cfg.KeySize != 0 {
		data["key_size"] = cfg.KeySize
	}
	if cfg.Imported {
		data["imported_key_allow_rotation"] = cfg.AllowImportedKeyRotation
	}
	if cfg.Derived {
		data["kdf"] = d.KDF
		data["convergent_encryption"] = cfg.ConvergentEncryption
		if cfg.ConvergentEncryption {
			data["convergent_encryption_version"] = transit.ConvergentVersion
		}
	}
	if d.Capabilities.Signing {
		type asym struct {
			Name             string    `json:"name"`
			PublicKey        string    `json:"public_key"`
			CertificateChain string    `json:"certificate_chain"`
			CreationTime     time.Time `json:"creation_time"`
		}
		keys := map[string]asym{}
		for _, v := range d.Versions {
			keys[strconv.Itoa(v.Version)] = asym{Name: v.Name, PublicKey: v.PublicKey, CreationTime: v.CreationTime}
		}
		data["keys"] = keys
	} else {
		keys := map[string]int64{}
		for _, v := range d.Versions {
			keys[strconv.Itoa(v.Version)] = v.CreationTime.Unix()
		}
		data["keys"] = keys
	}
	return c.respond(data)
}

func serveDelete(h *Handler, c *call) error {
	if err := h.keys.Delete(c.ctx, c.tenant, c.args.name); err != nil {
		return err
	}
	c.status = http.StatusNoContent
	return nil
}

func serveConfig(h *Handler, c *call) error {
	var u transit.ConfigUpdate
	for _, f := range []struct {
		name string
		dst  **int
	}{{"min_decryption_version", &u.MinDecryptionVersion}, {"min_encryption_version", &u.MinEncryptionVersion}} {
		if m := c.req.get(f.name); m != nil {
			n, err := m.integer()
			if err != nil {
				return err
			}
			*f.dst = &n
		}
	}
	for _, f := range []struct {
		name string
		dst  **bool
	}{{"deletion_allowed", &u.DeletionAllowed}, {"exportable", &u.Exportable}, {"allow_plaintext_backup", &u.AllowPlaintextBackup}} {
		if m := c.req.get(f.name); m != nil {
			b, err := m.boolean()
			if err != nil {
				return err
			}
			*f.dst = &b
		}
	}
	if d, ok, err := periodParam(c); err != nil {
		return err
	} else if ok {
		u.AutoRotatePeriod = &d
	}
	k, warnings, err := h.keys.Configure(c.ctx, c.tenant, c.args.name, u)
	if err != nil {
		return err
	}
	c.warnings = append(c.warnings, warnings...)
	return h.describe(c, k, nil)
}

func serveRotate(h *Handler, c *call) error {
	if ref, _, _ := c.str("external_key_ref"); len(ref) > 0 {
		return badRequest("external keys are not supported")
	}
	k, err := h.keys.Rotate(c.ctx, c.tenant, c.args.name, c.caller().Principal)
	if err != nil {
		return err
	}
	c.o.KeyVersion = k.LatestVersion()
	return h.describe(c, k, nil)
}

func serveTrim(h *Handler, c *call) error {
	m := c.req.get("min_available_version")
	if m == nil {
		return badRequest("missing min_available_version")
	}
	n, err := m.integer()
	if err != nil {
		return err
	}
	k, err := h.keys.Trim(c.ctx, c.tenant, c.args.name, n)
	if err != nil {
		return err
	}
	return h.describe(c, k, nil)
}

// importParams reads what import and import_version share: the wrapped
// key (ciphertext) or a public key, and hash_function (default SHA256;
// case-insensitive, as in Vault).
func importParams(c *call) (ciphertext, publicKey, hashFunction string, err error) {
	if hashFunction, err = c.text("hash_function", "SHA256"); err != nil {
		return "", "", "", err
	}
	if ciphertext, err = c.text("ciphertext", ""); err != nil {
		return "", "", "", err
	}
	publicKey, err = c.text("public_key", "")
	return ciphertext, publicKey, strings.ToUpper(hashFunction), err
}

func serveImport(h *Handler, c *call) error {
	if c.req.get("convergent_encryption") != nil {
		return badRequest("import cannot be used on keys with convergent encryption enabled")
	}
	o := transit.ImportOptions{Caller: c.caller()}
	typ, err := c.text("type", "aes256-gcm96")
	if err != nil {
		return err
	}
	if o.Type, err = transit.ParseKeyType(typ); err != nil {
		return badRequest("unknown key type: " + typ)
	}
	if o.Ciphertext, o.PublicKey, o.HashFunction, err = importParams(c); err != nil {
		return err
	}
	if err := c.flags(flag{"allow_rotation", &o.AllowRotation}, flag{"derived", &o.Derived},
		flag{"exportable", &o.Exportable}, flag{"allow_plaintext_backup", &o.AllowPlaintextBackup}); err != nil {
		return err
	}
	if o.AutoRotatePeriod, _, err = periodParam(c); err != nil {
		return err
	}
	k, err := h.keys.Import(c.ctx, c.tenant, c.args.name, o)
	if err != nil {
		return err
	}
	c.o.KeyVersion = k.LatestVersion()
	c.status = http.StatusNoContent
	return nil
}

func serveImportVersion(h *Handler, c *call) error {
	if c.req.get("version") != nil {
		return badRequest("version is not supported: import_version adds a new latest version")
	}
	o := transit.ImportVersionOptions{Caller: c.caller()}
	var err error
	if o.Ciphertext, o.PublicKey, o.HashFunction, err = importParams(c); err != nil {
		return err
	}
	k, err := h.keys.ImportVersion(c.ctx, c.tenant, c.args.name, o)
	if err != nil {
		return err
	}
	c.o.KeyVersion = k.LatestVersion()
	c.status = http.StatusNoContent
	return nil
}

func serveWrappingKey(h *Handler, c *call) error {
	w, err := h.keys.WrappingKey(c.ctx, c.tenant)
	if err != nil {
		return err
	}
	return c.respond(map[string]string{"public_key": w.PublicKeyPEM()})
}

func serveExport(h *Handler, c *call) error {
	typ, err := transit.ParseExportType(c.args.a1)
	if err != nil {
		return badRequest("invalid export type: " + c.args.a1)
	}
	format, err := c.text("format", "")
	if err != nil {
		return err
	}
	f, err := transit.ParseExportFormat(format)
	if err != nil {
		return badRequest("invalid format: " + format)
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	n := 0
	switch v := c.args.a2; v {
	case "":
	case "latest":
		n = k.LatestVersion()
	default:
		if n, err = strconv.Atoi(strings.TrimPrefix(v, "v")); err != nil || n < 1 {
			return badRequest("invalid key version")
		}
	}
	keys, err := h.eng.Export(k, typ, n, f)
	if err != nil {
		return err
	}
	defer func() {
		for _, ek := range keys {
			ek.Key.Zeroize()
		}
	}()
	c.begin()
	c.out = appendStr(append(c.out, '{'), "name", k.Name(), true)
	c.out = appendStr(c.out, "type", k.Type().String(), false)
	c.out = append(appendKey(c.out, "keys", false), '{')
	for i, ek := range keys {
		c.out = appendString(appendKey(c.out, strconv.Itoa(ek.Version), i == 0), ek.Key.Reveal())
	}
	c.out = append(c.out, "}}"...)
	c.end()
	c.o.KeyVersion = n
	return nil
}

// serveBackup answers Vault's backup/:name: the key's backup, which holds
// its material in plaintext (only a key with exportable and
// allow_plaintext_backup set has one). It passes through the call's
// buffer, which is cleared once the answer is written, and nowhere else.
func serveBackup(h *Handler, c *call) error {
	b, err := h.keys.Backup(c.ctx, c.tenant, c.args.name)
	if err != nil {
		return err
	}
	defer b.Zeroize()
	c.begin()
	c.out = append(appendStr(append(c.out, '{'), "backup", b.Reveal(), true), '}')
	c.end()
	return nil
}

// serveRestore answers Vault's restore and restore/:name: the backup's
// key becomes the caller's tenant's, under the path's name, else the
// body's, else the backup's own. A key of that name is replaced only with
// force. The backup is read in full before the audit log's pending record
// is written (it names the key) and before anything is stored.
func serveRestore(h *Handler, c *call) error {
	text, _, err := c.str("backup")
	if err != nil {
		return err
	}
	if len(text) == 0 {
		return badRequest("'backup' must be supplied")
	}
	force, err := c.boolean("force")
	if err != nil {
		return err
	}
	name := c.args.name
	if name == "" {
		if name, err = c.text("name", ""); err != nil {
			return err
		}
	}
	k, err := transit.ParseBackup(text)
	if err != nil {
		return err
	}
	if name == "" {
		name = k.Name()
	}
	if !keystore.ValidName(name) {
		return keystore.ErrInvalidName
	}
	if name != k.Name() {
		if k, err = k.Renamed(name); err != nil {
			return err
		}
	}
	c.o.Key = name
	if err := c.intent(); err != nil { // a restore makes a key: recorded first
		return err
	}
	if _, err := h.keys.Restore(c.ctx, c.tenant, k, force); err != nil {
		if errors.Is(err, keystore.ErrRestoreExists) {
			return &httperr.Error{Status: http.StatusBadRequest, Code: "exists", Description: "key " + strconv.Quote(name) + " already exists"}
		}
		return err
	}
	c.o.KeyVersion = k.LatestVersion()
	c.status = http.StatusNoContent
	return nil
}
