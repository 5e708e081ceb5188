package vaultapi

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"

	"github.com/keygate/keygate/internal/transit"
	"github.com/keygate/keygate/internal/transit/keystore"
)

// The cryptographic operations: encrypt, decrypt, rewrap, datakey, sign,
// verify (signatures and HMACs), hmac, random and hash.

func itoa(n int) string { return strconv.Itoa(n) }

// decodeB64 decodes standard base64 (as Vault's base64.StdEncoding, which
// skips line breaks) into dst's storage.
func decodeB64(dst, src []byte) ([]byte, error) {
	n := base64.StdEncoding.DecodedLen(len(src))
	dst = slices.Grow(dst[:0], n)[:n]
	m, err := base64.StdEncoding.Decode(dst, src)
	if err != nil {
		return dst[:0], err
	}
	return dst[:m], nil
}

// str reads a top-level string parameter; ok is false when it is absent.
func (c *call) str(name string) (s []byte, ok bool, err error) {
	m := c.req.get(name)
	if m == nil {
		return nil, false, nil
	}
	s, err = m.str()
	return s, err == nil, err
}

// b64 reads a base64 parameter into scratch slot i; absent is empty.
func (c *call) b64(name string, i int, what string) ([]byte, error) {
	s, ok, err := c.str(name)
	if err != nil || !ok || len(s) == 0 {
		return nil, err
	}
	b, err := decodeB64(c.scratch[i], s)
	c.scratch[i] = b
	if err != nil {
		return nil, badRequest("failed to base64-decode " + what + ": " + err.Error())
	}
	return b, nil
}

func (c *call) integer(name string, def int) (int, error) {
	m := c.req.get(name)
	if m == nil {
		return def, nil
	}
	return m.integer()
}

func (c *call) boolean(name string) (bool, error) {
	m := c.req.get(name)
	if m == nil {
		return false, nil
	}
	return m.boolean()
}

func (c *call) text(name, def string) (string, error) {
	s, ok, err := c.str(name)
	if err != nil || !ok {
		return def, err
	}
	return string(s), nil
}

// begin starts the response: the envelope up to the data.
func (c *call) begin() { c.out = appendHead(c.out[:0], &c.id, c.note.RequestID()) }

// end closes the response's envelope.
func (c *call) end() { c.out = appendTail(c.out, c.warnings) }

// endText closes an answer begun as {"field":"text (out, with the text
// appended) with the version that made it.
func (c *call) endText(out []byte, ver int) {
	c.out = append(appendInt(append(out, '"'), "key_version", ver, false), '}')
	c.end()
	c.o.KeyVersion = ver
}

// ciphertextRequest reads what decrypt and rewrap take, ciphertext
// (required), context and associated_data, and the key.
func (h *Handler) ciphertextRequest(c *call) (k *transit.Key, ct []byte, o transit.DecryptOptions, err error) {
	if ct, _, err = c.str("ciphertext"); err != nil {
		return nil, nil, o, err
	}
	if len(ct) == 0 {
		return nil, nil, o, badRequest("missing ciphertext to decrypt")
	}
	if o.Context, err = c.b64("context", 1, "context"); err != nil {
		return nil, nil, o, err
	}
	if o.AssociatedData, err = c.b64("associated_data", 2, "associated_data"); err != nil {
		return nil, nil, o, err
	}
	k, err = h.key(c)
	if err == nil && k.Waits() {
		o.Caller = c.caller() // as in serveEncrypt
	}
	return k, ct, o, err
}

// input reads the base64 input of sign, verify, hmac and hash; absent,
// it is empty, as in Vault.
func (c *call) input() ([]byte, error) {
	s, _, err := c.str("input")
	if err != nil {
		return nil, err
	}
	b, err := decodeB64(c.scratch[0], s)
	c.scratch[0] = b
	if err != nil {
		return nil, badRequest("unable to decode input as base64: " + err.Error())
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// verifyOne answers a verdict on the input and the text in the parameter
// field (a signature or an HMAC), checked by check; a text naming a
// version newer than k's is checked again on the key re-read.
func (h *Handler) verifyOne(c *call, k *transit.Key, field string, check func(*transit.Key, []byte, []byte) (transit.VerifyResult, error)) error {
	input, err := c.input()
	if err != nil {
		return err
	}
	text, _, err := c.str(field)
	if err != nil {
		return err
	}
	res, err := check(k, input, text)
	if nk := h.newer(c, k, err); nk != nil {
		res, err = check(nk, input, text)
	}
	if err != nil {
		return inField(field, err)
	}
	return c.valid(res)
}

// inField names the parameter a malformed engine input came from (the
// engine parses ciphertexts, signatures and HMACs alike and cannot), so
// that "not standard padded base64" says which one.
func inField(field string, err error) error {
	var te *transit.Error
	if !errors.As(err, &te) || te.Reason != transit.ReasonMalformed {
		return err
	}
	named := *te
	named.Detail = "invalid " + field + ": " + te.Detail
	return &named
}

// flag is a boolean parameter and where it goes.
type flag struct {
	name string
	dst  *bool
}

// flags reads boolean parameters.
func (c *call) flags(fs ...flag) (err error) {
	for _, f := range fs {
		if *f.dst, err = c.boolean(f.name); err != nil {
			return err
		}
	}
	return nil
}

// respond answers v as the data, marshaled with encoding/json.
func (c *call) respond(v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	c.begin()
	c.out = append(c.out, b...)
	c.end()
	return nil
}

// key returns the caller's key named in the path.
func (h *Handler) key(c *call) (*transit.Key, error) {
	return h.keys.Get(c.ctx, c.tenant, c.args.name)
}

// newer is the key to retry with after err named a version newer than k's
// latest (another node rotated it), or nil.
func (h *Handler) newer(c *call, k *transit.Key, err error) *transit.Key {
	if err == nil {
		return nil
	}
	var te *transit.Error
	if !errors.As(err, &te) || te.Reason != transit.ReasonUnknownVersion || te.Version <= k.LatestVersion() {
		return nil
	}
	nk, nerr := h.keys.Newer(c.ctx, c.tenant, k.Name(), te.Version)
	if nerr != nil || nk == k || nk.LatestVersion() < te.Version {
		return nil
	}
	return nk
}

// encryptKey is the key to encrypt with: the caller's key, or for a caller
// holding transit:admin a key made now (Vault's upsert), of the request's
// type, derived when the request gives a context.
func (h *Handler) encryptKey(c *call, contextSet bool) (*transit.Key, error) {
	k, err := h.key(c)
	if !errors.Is(err, keystore.ErrNotFound) || !c.admin() {
		return k, err
	}
	typ, err := c.text("type", "aes256-gcm96")
	if err != nil {
		return nil, err
	}
	t, err := transit.ParseKeyType(typ)
	switch {
	case err != nil || typ != t.String():
		return nil, badRequest("unknown key type " + typ)
	case !t.Capabilities().Encryption || !t.Capabilities().AssociatedData:
		return nil, badRequest("key type " + typ + " not supported for this operation")
	}
	convergent, err := c.boolean("convergent_encryption")
	if err != nil {
		return nil, err
	}
	if convergent && !contextSet {
		return nil, badRequest("convergent encryption requires derivation to be enabled, so context is required")
	}
	if err := c.intent(); err != nil { // the upsert makes a key: recorded first
		return nil, err
	}
	k, created, err := h.keys.Create(c.ctx, c.tenant, c.args.name, transit.CreateOptions{Type: t, Derived: contextSet, ConvergentEncryption: convergent,
		Caller: c.caller()})
	if err == nil && !created {
		c.warnings = append(c.warnings, "Attempted creation of the key during the encrypt operation, but it was created beforehand")
	}
	return k, err
}

func serveEncrypt(h *Handler, c *call) error {
	if items, ok, err := c.req.batch(); ok || err != nil {
		if err != nil {
			return err
		}
		return h.encryptBatch(c, items)
	}
	m := c.req.get("plaintext")
	if m == nil {
		return badRequest("missing plaintext to encrypt")
	}
	p64, err := m.str()
	if err != nil {
		return err
	}
	pt, err := decodeB64(c.scratch[0], p64)
	c.scratch[0] = pt
	if err != nil {
		return badRequest("failed to base64-decode plaintext: " + err.Error())
	}
	var o transit.EncryptOptions
	if o.Context, err = c.b64("context", 1, "context"); err != nil {
		return err
	}
	if o.AssociatedData, err = c.b64("associated_data", 2, "associated_data"); err != nil {
		return err
	}
	if o.KeyVersion, err = c.integer("key_version", 0); err != nil {
		return err
	}
	k, err := h.encryptKey(c, len(o.Context) != 0)
	if err != nil {
		return err
	}
	if k.Waits() {
		// Only then is the caller used (an RSA key's worker turn), and
		// reading the token's claims for an AEAD key was a tenth of the
		// handler's own work.
		o.Caller = c.caller()
	}
	c.begin()
	c.out = append(c.out, `{"ciphertext":"`...)
	out, ver, err := h.eng.AppendEncrypt(c.ctx, c.out, k, pt, o)
	if err != nil {
		return err
	}
	c.endText(out, ver)
	return nil
}

func serveDecrypt(h *Handler, c *call) error {
	if items, ok, err := c.req.batch(); ok || err != nil {
		if err != nil {
			return err
		}
		return h.decryptBatch(c, items)
	}
	k, ct, o, err := h.ciphertextRequest(c)
	if err != nil {
		return err
	}
	pt, ver, err := h.eng.AppendDecrypt(c.ctx, c.scratch[0][:0], k, ct, o)
	if nk := h.newer(c, k, err); nk != nil {
		pt, ver, err = h.eng.AppendDecrypt(c.ctx, c.scratch[0][:0], nk, ct, o)
	}
	c.scratch[0] = pt
	if err != nil {
		return inField("ciphertext", err)
	}
	c.begin()
	c.out = append(c.out, `{"plaintext":"`...)
	c.endText(base64.StdEncoding.AppendEncode(c.out, pt), ver)
	return nil
}

func serveRewrap(h *Handler, c *call) error {
	if items, ok, err := c.req.batch(); ok || err != nil {
		if err != nil {
			return err
		}
		return h.rewrapBatch(c, items)
	}
	k, ct, do, err := h.ciphertextRequest(c)
	if err != nil {
		return err
	}
	o := transit.RewrapOptions{Context: do.Context, AssociatedData: do.AssociatedData, Caller: do.Caller}
	if o.KeyVersion, err = c.integer("key_version", 0); err != nil {
		return err
	}
	c.begin()
	c.out = append(c.out, `{"ciphertext":"`...)
	mark := len(c.out)
	out, ver, err := h.eng.AppendRewrap(c.ctx, c.out, k, ct, o)
	if nk := h.newer(c, k, err); nk != nil {
		out, ver, err = h.eng.AppendRewrap(c.ctx, c.out[:mark], nk, ct, o)
	}
	if err != nil {
		return inField("ciphertext", err)
	}
	c.endText(out, ver)
	return nil
}

func serveDataKey(h *Handler, c *call) error {
	var wrapped bool
	switch c.args.a1 {
	case "plaintext":
	case "wrapped":
		wrapped = true
	default:
		return badRequest("Invalid path, must be 'plaintext' or 'wrapped'")
	}
	o := transit.EncryptOptions{Caller: c.caller()}
	var err error
	if o.Context, err = c.b64("context", 1, "context"); err != nil {
		return err
	}
	if o.AssociatedData, err = c.b64("associated_data", 2, "associated_data"); err != nil {
		return err
	}
	if o.KeyVersion, err = c.integer("key_version", 0); err != nil {
		return err
	}
	bits, err := c.integer("bits", 256)
	if err != nil {
		return err
	}
	if bits != 128 && bits != 256 && bits != 512 {
		return badRequest("invalid bit length")
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	dk, err := h.eng.DataKey(c.ctx, k, bits, wrapped, o)
	if err != nil {
		return err
	}
	defer dk.Plaintext.Zeroize()
	c.begin()
	c.out = appendStr(append(c.out, '{'), "ciphertext", dk.Ciphertext, true)
	c.out = appendInt(c.out, "key_version", dk.KeyVersion, false)
	if !wrapped {
		c.out = append(appendKey(c.out, "plaintext", false), '"')
		c.out = append(dk.Plaintext.AppendBase64(c.out), '"')
	}
	c.out = append(c.out, '}')
	c.end()
	c.o.KeyVersion = dk.KeyVersion
	return nil
}

// signOptions reads the parameters sign and verify share.
func (c *call) signOptions() (transit.SignOptions, error) {
	o := transit.SignOptions{Caller: c.caller()}
	alg := c.args.a1
	var err error
	if alg == "" {
		if alg, err = c.text("hash_algorithm", ""); err != nil {
			return o, err
		}
	}
	if alg == "" {
		if alg, err = c.text("algorithm", ""); err != nil {
			return o, err
		}
	}
	if o.HashAlgorithm, err = transit.ParseHashAlgorithm(alg); err != nil {
		return o, badRequest("invalid hash algorithm " + strconv.Quote(alg))
	}
	m, err := c.text("marshaling_algorithm", "")
	if err != nil {
		return o, err
	}
	if o.Marshaling, err = transit.ParseMarshaling(m); err != nil {
		return o, badRequest("invalid marshaling type " + strconv.Quote(m))
	}
	if o.Prehashed, err = c.boolean("prehashed"); err != nil {
		return o, err
	}
	sa, err := c.text("signature_algorithm", "")
	if err != nil {
		return o, err
	}
	if o.SignatureAlgorithm, err = transit.ParseSignatureAlgorithm(sa); err != nil {
		return o, badRequest("unsupported signature_algorithm " + strconv.Quote(sa))
	}
	sl, err := c.text("salt_length", "")
	if err != nil {
		return o, err
	}
	if o.SaltLength, err = transit.ParseSaltLength(sl); err != nil {
		return o, badRequest("salt length neither 'auto', 'hash', nor an int: " + sl)
	}
	return o, nil
}

func serveSign(h *Handler, c *call) error {
	o, err := c.signOptions()
	if err != nil {
		return err
	}
	if o.KeyVersion, err = c.integer("key_version", 0); err != nil {
		return err
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	items, isBatch, err := c.req.batch()
	if err != nil {
		return err
	}
	if isBatch {
		return h.signBatch(c, k, items, o)
	}
	// A missing input signs the empty input, as in Vault.
	input, err := c.input()
	if err != nil {
		return err
	}
	if o.Context, err = c.b64("context", 1, "context"); err != nil {
		return err
	}
	res, err := h.eng.Sign(c.ctx, k, input, o)
	if err != nil {
		return err
	}
	c.begin()
	c.out = appendStr(append(c.out, '{'), "signature", res.Signature, true)
	c.out = appendInt(c.out, "key_version", res.KeyVersion, false)
	if len(res.PublicKey) > 0 {
		c.out = append(appendKey(c.out, "public_key", false), '"')
		c.out = append(base64.StdEncoding.AppendEncode(c.out, res.PublicKey), '"')
	}
	c.out = append(c.out, '}')
	c.end()
	c.o.KeyVersion = res.KeyVersion
	return nil
}

func serveVerify(h *Handler, c *call) error {
	items, isBatch, err := c.req.batch()
	if err != nil {
		return err
	}
	// Signatures or HMACs, never both (Vault's rules and messages).
	sig, hmac, missing := false, false, false
	if isBatch {
		for _, it := range items {
			ms := c.req.members(it)
			switch {
			case get(ms, "signature") != nil:
				sig = true
			case get(ms, "hmac") != nil:
				hmac = true
			default:
				missing = true
			}
		}
	} else {
		sig, hmac = c.req.get("signature") != nil, c.req.get("hmac") != nil
	}
	switch {
	case !isBatch && sig && hmac:
		return badRequest("provide one of 'signature' or 'hmac'")
	case !isBatch && !sig && !hmac:
		return badRequest("neither a 'signature' nor an 'hmac' were given to verify")
	case sig && hmac:
		return badRequest("elements of batch_input must all provide 'signature' or all provide 'hmac'")
	case missing && sig:
		return badRequest("some elements of batch_input are missing 'signature'")
	case missing && hmac:
		return badRequest("some elements of batch_input are missing 'hmac'")
	case missing:
		return badRequest("no batch_input elements have 'signature' or 'hmac'")
	case hmac:
		return h.verifyHMAC(c, items, isBatch)
	}
	o, err := c.signOptions()
	if err != nil {
		return err
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	if isBatch {
		return h.verifyBatch(c, k, items, o)
	}
	if o.Context, err = c.b64("context", 1, "context"); err != nil {
		return err
	}
	return h.verifyOne(c, k, "signature", func(k *transit.Key, input, sig []byte) (transit.VerifyResult, error) {
		return h.eng.VerifyBytes(c.ctx, k, input, sig, o)
	})
}

// valid answers a single verdict.
func (c *call) valid(res transit.VerifyResult) error {
	c.begin()
	c.out = appendBool(append(c.out, '{'), "valid", res.Valid, true)
	c.out = appendInt(c.out, "key_version", res.KeyVersion, false)
	c.out = append(c.out, '}')
	c.end()
	c.o.KeyVersion = res.KeyVersion
	return nil
}

// hmacAlgorithm is the algorithm of hmac and verify-hmac: the path's, else
// hash_algorithm (verify only), else algorithm.
func (c *call) hmacAlgorithm(verify bool) (transit.HashAlgorithm, error) {
	alg := c.args.a1
	var err error
	if alg == "" && verify {
		if alg, err = c.text("hash_algorithm", ""); err != nil {
			return 0, err
		}
	}
	if alg == "" {
		if alg, err = c.text("algorithm", ""); err != nil {
			return 0, err
		}
	}
	h, err := transit.ParseHashAlgorithm(alg)
	if err != nil || h == transit.SHA1 || h == transit.HashNone {
		return 0, badRequest("unsupported algorithm " + strconv.Quote(alg))
	}
	return h, nil
}

func (h *Handler) verifyHMAC(c *call, items []item, isBatch bool) error {
	alg, err := c.hmacAlgorithm(true)
	if err != nil {
		return err
	}
	o := transit.HMACOptions{Algorithm: alg}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	if !isBatch {
		return h.verifyOne(c, k, "hmac", func(k *transit.Key, input, mac []byte) (transit.VerifyResult, error) {
			return h.eng.VerifyHMACBytes(k, input, mac, o)
		})
	}
	return h.verifyHMACBatch(c, k, items, o)
}

func serveHMAC(h *Handler, c *call) error {
	alg, err := c.hmacAlgorithm(false)
	if err != nil {
		return err
	}
	o := transit.HMACOptions{Algorithm: alg}
	if o.KeyVersion, err = c.integer("key_version", 0); err != nil {
		return err
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	items, isBatch, err := c.req.batch()
	if err != nil {
		return err
	}
	if !isBatch {
		if c.req.get("input") == nil {
			return badRequest("missing input for HMAC")
		}
		input, err := c.input()
		if err != nil {
			return err
		}
		c.begin()
		c.out = append(c.out, `{"hmac":"`...)
		out, ver, err := h.eng.AppendHMAC(c.out, k, input, o)
		if err != nil {
			return err
		}
		c.endText(out, ver)
		return nil
	}
	return h.hmacBatch(c, k, items, o)
}

// validSource reports a random source Vault knows.
func validSource(s string) bool { return s == "platform" || s == "seal" || s == "all" }

func serveRandom(h *Handler, c *call) error {
	source, n := "platform", 0
	var err error
	switch {
	case c.args.a1 == "":
		n, err = c.integer("bytes", 32)
	case c.args.a2 == "" && validSource(c.args.a1):
		source = c.args.a1
		n, err = c.integer("bytes", 32)
	case c.args.a2 == "":
		if n, err = strconv.Atoi(c.args.a1); err != nil {
			return badRequest("error parsing url-set byte count: " + err.Error())
		}
	default:
		source = c.args.a1
		if n, err = strconv.Atoi(c.args.a2); err != nil {
			return badRequest("error parsing url-set byte count: " + err.Error())
		}
	}
	if err != nil {
		return err
	}
	if m := c.req.get("source"); m != nil && c.args.a1 == "" {
		s, err := m.str()
		if err != nil {
			return err
		}
		source = string(s)
	}
	format, err := c.text("format", "base64")
	if err != nil {
		return err
	}
	switch {
	case n < 1:
		return badRequest("'bytes' cannot be less than 1")
	case n > transit.MaxRandomBytes:
		return badRequest("'bytes' should be less than " + itoa(transit.MaxRandomBytes))
	case format != "hex" && format != "base64":
		return badRequest(`unsupported encoding format "` + format + `"; must be "hex" or "base64"`)
	}
	switch source {
	case "", "platform", "all":
	case "seal":
		c.warnings = append(c.warnings, "no seal/entropy augmentation available, using platform entropy source")
	default:
		return badRequest(`unsupported entropy source "` + source + `"; must be "platform" or "seal", or "all"`)
	}
	b, err := h.eng.Random(n)
	if err != nil {
		return err
	}
	defer clear(b)
	c.begin()
	c.out = append(c.out, `{"random_bytes":"`...)
	c.out = appendEncoded(c.out, b, format)
	c.out = append(c.out, `"}`...)
	c.end()
	return nil
}

// appendEncoded appends b in hex or base64.
func appendEncoded(dst, b []byte, format string) []byte {
	if format == "hex" {
		return hex.AppendEncode(dst, b)
	}
	return base64.StdEncoding.AppendEncode(dst, b)
}

func serveHash(h *Handler, c *call) error {
	if c.req.get("input") == nil {
		return badRequest("input missing")
	}
	input, err := c.input()
	if err != nil {
		return err
	}
	format, err := c.text("format", "hex")
	if err != nil {
		return err
	}
	if format != "hex" && format != "base64" {
		return badRequest(`unsupported encoding format ` + format + `; must be "hex" or "base64"`)
	}
	alg := c.args.a1
	if alg == "" {
		if alg, err = c.text("algorithm", "sha2-256"); err != nil {
			return err
		}
	}
	ha, err := transit.ParseHashAlgorithm(alg)
	if err != nil || ha == transit.SHA1 || ha == transit.HashNone || alg == "" {
		return badRequest("unsupported algorithm " + alg)
	}
	sum, err := transit.AppendHash(c.scratch[1][:0], ha, input)
	if err != nil {
		return err
	}
	c.scratch[1] = sum
	c.begin()
	c.out = append(c.out, `{"sum":"`...)
	c.out = appendEncoded(c.out, sum, format)
	c.out = append(c.out, `"}`...)
	c.end()
	return nil
}
