package transitapi

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/keygate/keygate/internal/transit"
	"github.com/keygate/keygate/internal/transitkeys"
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
func (c *call) begin() { c.out = appendHead(c.out[:0], &c.id) }

// end closes the response's envelope.
func (c *call) end() { c.out = appendTail(c.out, c.warnings) }

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

// contextRule is Vault's rule that a batch gives a context in every item
// or in none.
var errContextMix = badRequest("context should be set either in all the request blocks or in none")

// batchStatus is the status of an encrypt or decrypt batch, as Vault sets
// it: 400 when an item failed by the caller's fault, else 500 when one
// failed by the service's, unless some succeeded and the request gave
// partial_failure_response_code.
func (h *Handler) batchStatus(c *call, ok, userErr, internalErr bool) error {
	if !userErr && !internalErr {
		return nil
	}
	code := http.StatusBadRequest
	if !userErr {
		code = http.StatusInternalServerError
	}
	if m := c.req.get("partial_failure_response_code"); m != nil && ok {
		n, err := m.integer()
		if err != nil {
			return err
		}
		if n < 1 || n > 599 {
			c.warnings = append(c.warnings, "invalid HTTP response code override from partial_failure_response_code, reverting to "+itoa(code))
		} else {
			code = n
		}
	}
	c.status = code
	return nil
}

// encryptKey is the key to encrypt with: the caller's key, or for a caller
// holding transit:admin a key made now (Vault's upsert), of the request's
// type, derived when the request gives a context.
func (h *Handler) encryptKey(c *call, contextSet bool) (*transit.Key, error) {
	k, err := h.key(c)
	if !errors.Is(err, transitkeys.ErrNotFound) || !c.admin {
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
	k, created, err := h.keys.Create(c.ctx, c.tenant, c.args.name, transit.CreateOptions{Type: t, Derived: contextSet, ConvergentEncryption: convergent})
	if err == nil && !created {
		c.warnings = append(c.warnings, "Attempted creation of the key during the encrypt operation, but it was created beforehand")
	}
	return k, err
}

func serveEncrypt(h *Handler, c *call) error {
	items, isBatch, err := c.req.batch()
	if err != nil {
		return err
	}
	if isBatch {
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
		return badRequest(err.Error())
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
	c.begin()
	c.out = append(c.out, `{"ciphertext":"`...)
	out, ver, err := h.eng.AppendEncrypt(c.out, k, pt, o)
	if err != nil {
		return err
	}
	c.out = appendInt(append(out, '"'), "key_version", ver, false)
	c.out = append(c.out, '}')
	c.end()
	c.o.KeyVersion = ver
	return nil
}

// batchItems checks a batch's size and returns it.
func (h *Handler) batchItems(c *call, items []item) error {
	switch {
	case len(items) == 0:
		return badRequest("missing batch input to process")
	case len(items) > h.maxBatch:
		return errBatchLarge
	}
	c.o.Items = len(items)
	return nil
}

// itemStr reads a batch item's string member (absent: empty).
func itemStr(ms []member, name string) ([]byte, bool, error) {
	m := get(ms, name)
	if m == nil {
		return nil, false, nil
	}
	s, err := m.strictStr()
	return s, true, err
}

// arena decodes the base64 members of a batch into one buffer, sized
// first so that the slices it hands out stay valid.
type arena struct{ b []byte }

func (a *arena) decode(src []byte) ([]byte, error) {
	if len(src) == 0 {
		return nil, nil
	}
	start := len(a.b)
	n := base64.StdEncoding.DecodedLen(len(src))
	m, err := base64.StdEncoding.Decode(a.b[start:start+n], src)
	if err != nil {
		return nil, err
	}
	a.b = a.b[:start+m]
	return a.b[start : start+m : start+m], nil
}

// newArena sizes slot i for the base64 members named of every item.
func (c *call) newArena(i int, items []item, names ...string) *arena {
	n := 0
	for _, it := range items {
		for _, name := range names {
			if m := get(c.req.members(it), name); m != nil && m.kind == kString {
				n += base64.StdEncoding.DecodedLen(len(m.text))
			}
		}
	}
	c.scratch[i] = slices.Grow(c.scratch[i][:0], n)
	return &arena{b: c.scratch[i][:0:n]}
}

// context checks Vault's context rule over a batch and returns whether
// contexts are given.
func (c *call) contextSet(items []item) (bool, error) {
	set := false
	for i, it := range items {
		m := get(c.req.members(it), "context")
		has := m != nil && !(m.kind == kString && len(m.text) == 0)
		if i == 0 {
			set = has
		} else if has != set {
			return false, errContextMix
		}
	}
	return set, nil
}

// appendReference closes a batch result with its reference.
func (c *call) appendReference(it item, first bool) {
	ref, _, _ := itemStr(c.req.members(it), "reference")
	c.out = appendStr(c.out, "reference", ref, first)
	c.out = append(c.out, '}')
}

func (h *Handler) encryptBatch(c *call, items []item) error {
	if err := h.batchItems(c, items); err != nil {
		return err
	}
	ctxSet, err := c.contextSet(items)
	if err != nil {
		return err
	}
	n := len(items)
	c.pre = slices.Grow(c.pre[:0], n)[:n]
	c.idx = c.idx[:0]
	c.encItems = c.encItems[:0]
	a := c.newArena(0, items, "plaintext", "context", "associated_data")
	for i, it := range items {
		ms := c.req.members(it)
		c.pre[i] = ""
		var e transit.EncryptItem
		p64, ok, err := itemStr(ms, "plaintext")
		switch {
		case err != nil:
			c.pre[i] = err.Error()
			continue
		case !ok:
			c.pre[i] = "'[" + itoa(i) + "].plaintext' missing plaintext to encrypt"
			continue
		}
		if e.Plaintext, err = a.decode(p64); err != nil {
			c.pre[i] = err.Error()
			continue
		}
		if e.Plaintext == nil {
			e.Plaintext = []byte{}
		}
		for _, f := range []struct {
			name string
			dst  *[]byte
		}{{"context", &e.Context}, {"associated_data", &e.AssociatedData}} {
			s, _, err := itemStr(ms, f.name)
			if err == nil {
				*f.dst, err = a.decode(s)
			}
			if err != nil {
				c.pre[i] = err.Error()
				break
			}
		}
		if c.pre[i] != "" {
			continue
		}
		if m := get(ms, "key_version"); m != nil {
			if e.KeyVersion, err = m.integer(); err != nil {
				c.pre[i] = err.Error()
				continue
			}
		}
		c.idx = append(c.idx, i)
		c.encItems = append(c.encItems, e)
	}
	k, err := h.encryptKey(c, ctxSet)
	if err != nil {
		return err
	}
	res, buf, err := h.eng.EncryptBatchInto(c.ctx, k, c.encItems, c.encRes, c.scratch[1])
	c.encRes, c.scratch[1] = res, buf
	if err != nil {
		return err
	}
	c.begin()
	c.out = append(c.out, `{"batch_results":[`...)
	okAny, userErr, internalErr := false, false, false
	j := 0
	for i, it := range items {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, '{')
		first := true
		msg, user := c.pre[i], true
		if msg == "" {
			r := &res[j]
			j++
			if r.Err == nil {
				c.out = appendStr(c.out, "ciphertext", r.Ciphertext, true)
				c.out = appendInt(c.out, "key_version", r.KeyVersion, false)
				first, okAny = false, true
			} else {
				msg, user = h.itemError(c, r.Err)
			}
		}
		if msg != "" {
			c.out = appendStr(c.out, "error", msg, true)
			first = false
			c.o.Failed++
			userErr, internalErr = userErr || user, internalErr || !user
		}
		c.appendReference(it, first)
	}
	c.out = append(c.out, "]}"...)
	err = h.batchStatus(c, okAny, userErr, internalErr) // before end: it may add a warning
	c.end()
	return err
}

func serveDecrypt(h *Handler, c *call) error {
	items, isBatch, err := c.req.batch()
	if err != nil {
		return err
	}
	if isBatch {
		return h.decryptBatch(c, items)
	}
	ct, _, err := c.str("ciphertext")
	if err != nil {
		return err
	}
	if len(ct) == 0 {
		return badRequest("missing ciphertext to decrypt")
	}
	var o transit.DecryptOptions
	if o.Context, err = c.b64("context", 1, "context"); err != nil {
		return err
	}
	if o.AssociatedData, err = c.b64("associated_data", 2, "associated_data"); err != nil {
		return err
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	pt, ver, err := h.eng.AppendDecrypt(c.ctx, c.scratch[0][:0], k, ct, o)
	if nk := h.newer(c, k, err); nk != nil {
		pt, ver, err = h.eng.AppendDecrypt(c.ctx, c.scratch[0][:0], nk, ct, o)
	}
	c.scratch[0] = pt
	if err != nil {
		return err
	}
	c.begin()
	c.out = append(c.out, `{"plaintext":"`...)
	c.out = base64.StdEncoding.AppendEncode(c.out, pt)
	c.out = appendInt(append(c.out, '"'), "key_version", ver, false)
	c.out = append(c.out, '}')
	c.end()
	c.o.KeyVersion = ver
	return nil
}

func (h *Handler) decryptBatch(c *call, items []item) error {
	if err := h.batchItems(c, items); err != nil {
		return err
	}
	if _, err := c.contextSet(items); err != nil {
		return err
	}
	n := len(items)
	c.pre = slices.Grow(c.pre[:0], n)[:n]
	c.idx = c.idx[:0]
	dec := make([]transit.DecryptItem, 0, n)
	a := c.newArena(0, items, "context", "associated_data")
	for i, it := range items {
		ms := c.req.members(it)
		c.pre[i] = ""
		ct, _, err := itemStr(ms, "ciphertext")
		var d transit.DecryptItem
		switch {
		case err != nil:
			c.pre[i] = err.Error()
		case len(ct) == 0:
			c.pre[i] = "missing ciphertext to decrypt"
		default:
			d.Ciphertext = ct
			for _, f := range []struct {
				name string
				dst  *[]byte
			}{{"context", &d.Context}, {"associated_data", &d.AssociatedData}} {
				s, _, err := itemStr(ms, f.name)
				if err == nil {
					*f.dst, err = a.decode(s)
				}
				if err != nil {
					c.pre[i] = err.Error()
					break
				}
			}
		}
		if c.pre[i] == "" {
			c.idx = append(c.idx, i)
			dec = append(dec, d)
		}
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	res, err := h.eng.DecryptBatch(c.ctx, k, dec)
	if err != nil {
		return err
	}
	h.retryNewer(c, k, len(res), func(i int) error { return res[i].Err }, func(nk *transit.Key, redo []int) {
		again := make([]transit.DecryptItem, len(redo))
		for j, i := range redo {
			again[j] = dec[i]
		}
		if r2, err := h.eng.DecryptBatch(c.ctx, nk, again); err == nil {
			for j, i := range redo {
				res[i] = r2[j]
			}
		}
	})
	c.begin()
	c.out = append(c.out, `{"batch_results":[`...)
	okAny, userErr, internalErr := false, false, false
	j := 0
	for i, it := range items {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		msg, user := c.pre[i], true
		var r *transit.DecryptItemResult
		if msg == "" {
			r = &res[j]
			j++
			if r.Err != nil {
				msg, user = h.itemError(c, r.Err)
			}
		}
		c.out = append(c.out, `{"plaintext":"`...)
		if msg == "" {
			c.out = base64.StdEncoding.AppendEncode(c.out, r.Plaintext)
			clear(r.Plaintext)
			c.out = appendInt(append(c.out, '"'), "key_version", r.KeyVersion, false)
			okAny = true
		} else {
			c.out = append(c.out, '"')
			c.out = appendStr(c.out, "error", msg, false)
			c.o.Failed++
			userErr, internalErr = userErr || user, internalErr || !user
		}
		c.appendReference(it, false)
	}
	c.out = append(c.out, "]}"...)
	err = h.batchStatus(c, okAny, userErr, internalErr) // before end: it may add a warning
	c.end()
	return err
}

// retryNewer redoes, with the key re-read, the results of a batch that
// failed because their text named a version newer than k's latest.
func (h *Handler) retryNewer(c *call, k *transit.Key, n int, errOf func(int) error, redo func(nk *transit.Key, idx []int)) {
	var idx []int
	var first error
	for i := range n {
		if err := errOf(i); errors.Is(err, transit.ErrUnknownVersion) {
			if first == nil || versionOf(err) > versionOf(first) {
				first = err
			}
			idx = append(idx, i)
		}
	}
	if first == nil {
		return
	}
	if nk := h.newer(c, k, first); nk != nil {
		redo(nk, idx)
	}
}

func versionOf(err error) int {
	var te *transit.Error
	if errors.As(err, &te) {
		return te.Version
	}
	return 0
}

func serveRewrap(h *Handler, c *call) error {
	items, isBatch, err := c.req.batch()
	if err != nil {
		return err
	}
	if isBatch {
		return h.rewrapBatch(c, items)
	}
	ct, _, err := c.str("ciphertext")
	if err != nil {
		return err
	}
	if len(ct) == 0 {
		return badRequest("missing ciphertext to decrypt")
	}
	var o transit.RewrapOptions
	if o.Context, err = c.b64("context", 1, "context"); err != nil {
		return err
	}
	if o.AssociatedData, err = c.b64("associated_data", 2, "associated_data"); err != nil {
		return err
	}
	if o.KeyVersion, err = c.integer("key_version", 0); err != nil {
		return err
	}
	k, err := h.key(c)
	if err != nil {
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
		return err
	}
	c.out = appendInt(append(out, '"'), "key_version", ver, false)
	c.out = append(c.out, '}')
	c.end()
	c.o.KeyVersion = ver
	return nil
}

func (h *Handler) rewrapBatch(c *call, items []item) error {
	if err := h.batchItems(c, items); err != nil {
		return err
	}
	if _, err := c.contextSet(items); err != nil {
		return err
	}
	n := len(items)
	c.pre = slices.Grow(c.pre[:0], n)[:n]
	rw := make([]transit.RewrapItem, 0, n)
	a := c.newArena(0, items, "context", "associated_data")
	for i, it := range items {
		ms := c.req.members(it)
		c.pre[i] = ""
		ct, _, err := itemStr(ms, "ciphertext")
		var r transit.RewrapItem
		switch {
		case err != nil:
			c.pre[i] = err.Error()
		case len(ct) == 0:
			c.pre[i] = "missing ciphertext to decrypt"
		default:
			r.Ciphertext = ct
			for _, f := range []struct {
				name string
				dst  *[]byte
			}{{"context", &r.Context}, {"associated_data", &r.AssociatedData}} {
				s, _, err := itemStr(ms, f.name)
				if err == nil {
					*f.dst, err = a.decode(s)
				}
				if err != nil {
					c.pre[i] = err.Error()
					break
				}
			}
			if m := get(ms, "key_version"); m != nil && c.pre[i] == "" {
				if r.KeyVersion, err = m.integer(); err != nil {
					c.pre[i] = err.Error()
				}
			}
		}
		if c.pre[i] == "" {
			rw = append(rw, r)
		}
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	res, err := h.eng.RewrapBatch(c.ctx, k, rw)
	if err != nil {
		return err
	}
	h.retryNewer(c, k, len(res), func(i int) error { return res[i].Err }, func(nk *transit.Key, redo []int) {
		again := make([]transit.RewrapItem, len(redo))
		for j, i := range redo {
			again[j] = rw[i]
		}
		if r2, err := h.eng.RewrapBatch(c.ctx, nk, again); err == nil {
			for j, i := range redo {
				res[i] = r2[j]
			}
		}
	})
	// Vault answers a rewrap batch 200 whatever its items' errors.
	return h.writeEncryptResults(c, items, res)
}

// writeEncryptResults writes Vault's encrypt-shaped batch results
// (ciphertext, key_version, error, reference) of items, whose pre-errors
// are in c.pre and whose other results are res in order.
func (h *Handler) writeEncryptResults(c *call, items []item, res []transit.EncryptResult) error {
	c.begin()
	c.out = append(c.out, `{"batch_results":[`...)
	j := 0
	for i, it := range items {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, '{')
		msg, first := c.pre[i], true
		if msg == "" {
			r := &res[j]
			j++
			if r.Err == nil {
				c.out = appendStr(c.out, "ciphertext", r.Ciphertext, true)
				c.out = appendInt(c.out, "key_version", r.KeyVersion, false)
				first = false
			} else {
				msg, _ = h.itemError(c, r.Err)
			}
		}
		if msg != "" {
			c.out = appendStr(c.out, "error", msg, true)
			first = false
			c.o.Failed++
		}
		c.appendReference(it, first)
	}
	c.out = append(c.out, "]}"...)
	c.end()
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
	var o transit.EncryptOptions
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
	dk, err := h.eng.DataKey(k, bits, wrapped, o)
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
	var o transit.SignOptions
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
	input, err := c.b64("input", 0, "input")
	if err != nil {
		return badRequest("unable to decode input as base64: " + err.Error())
	}
	if o.Context, err = c.b64("context", 1, "context"); err != nil {
		return err
	}
	if input == nil {
		input = []byte{}
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

func (h *Handler) signBatch(c *call, k *transit.Key, items []item, o transit.SignOptions) error {
	if err := h.batchItems(c, items); err != nil {
		return err
	}
	n := len(items)
	c.pre = slices.Grow(c.pre[:0], n)[:n]
	si := make([]transit.SignItem, 0, n)
	a := c.newArena(0, items, "input", "context")
	for i, it := range items {
		ms := c.req.members(it)
		c.pre[i] = ""
		in, ok, err := itemStr(ms, "input")
		var s transit.SignItem
		switch {
		case err != nil:
			c.pre[i] = err.Error()
		case !ok:
			c.pre[i] = "missing input"
		default:
			if s.Input, err = a.decode(in); err != nil {
				c.pre[i] = "unable to decode input as base64: " + err.Error()
				break
			}
			if s.Input == nil {
				s.Input = []byte{}
			}
			cx, _, err := itemStr(ms, "context")
			if err == nil {
				s.Context, err = a.decode(cx)
			}
			if err != nil {
				c.pre[i] = "failed to base64-decode context"
			}
		}
		if c.pre[i] == "" {
			si = append(si, s)
		}
	}
	res, err := h.eng.SignBatch(c.ctx, k, si, o)
	if err != nil {
		return err
	}
	c.begin()
	c.out = append(c.out, `{"batch_results":[`...)
	j := 0
	for i, it := range items {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, '{')
		msg, ver := c.pre[i], 0
		var r *transit.SignItemResult
		if msg == "" {
			r = &res[j]
			j++
			if r.Err != nil {
				msg, _ = h.itemError(c, r.Err)
			}
		}
		first := true
		if msg == "" {
			c.out = appendStr(c.out, "signature", r.Signature, true)
			first, ver = false, r.KeyVersion
		}
		c.out = appendInt(c.out, "key_version", ver, first)
		if msg == "" && len(r.PublicKey) > 0 {
			c.out = append(appendKey(c.out, "publickey", false), '"')
			c.out = append(base64.StdEncoding.AppendEncode(c.out, r.PublicKey), '"')
		}
		if msg != "" {
			c.out = appendStr(c.out, "error", msg, false)
			c.o.Failed++
		}
		c.appendReference(it, false)
	}
	c.out = append(c.out, "]}"...)
	c.end()
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
	input, err := c.b64("input", 0, "input")
	if err != nil {
		return badRequest("unable to decode input as base64: " + err.Error())
	}
	if o.Context, err = c.b64("context", 1, "context"); err != nil {
		return err
	}
	s, _, err := c.str("signature")
	if err != nil {
		return err
	}
	if input == nil {
		input = []byte{}
	}
	res, err := h.eng.VerifyBytes(k, input, s, o)
	if nk := h.newer(c, k, err); nk != nil {
		res, err = h.eng.VerifyBytes(nk, input, s, o)
	}
	if err != nil {
		return err
	}
	return c.valid(res)
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

func (h *Handler) verifyBatch(c *call, k *transit.Key, items []item, o transit.SignOptions) error {
	if err := h.batchItems(c, items); err != nil {
		return err
	}
	n := len(items)
	c.pre = slices.Grow(c.pre[:0], n)[:n]
	vi := make([]transit.VerifyItem, 0, n)
	a := c.newArena(0, items, "input", "context")
	for i, it := range items {
		ms := c.req.members(it)
		c.pre[i] = ""
		in, ok, err := itemStr(ms, "input")
		var v transit.VerifyItem
		switch {
		case err != nil:
			c.pre[i] = err.Error()
		case !ok:
			c.pre[i] = "missing input"
		default:
			if v.Input, err = a.decode(in); err != nil {
				c.pre[i] = "unable to decode input as base64: " + err.Error()
				break
			}
			if v.Input == nil {
				v.Input = []byte{}
			}
			if v.Signature, _, err = itemStr(ms, "signature"); err != nil {
				c.pre[i] = err.Error()
				break
			}
			cx, _, err := itemStr(ms, "context")
			if err == nil {
				v.Context, err = a.decode(cx)
			}
			if err != nil {
				c.pre[i] = "failed to base64-decode context"
			}
		}
		if c.pre[i] == "" {
			vi = append(vi, v)
		}
	}
	res, err := h.eng.VerifyBatch(c.ctx, k, vi, o)
	if err != nil {
		return err
	}
	h.retryNewer(c, k, len(res), func(i int) error { return res[i].Err }, func(nk *transit.Key, redo []int) {
		again := make([]transit.VerifyItem, len(redo))
		for j, i := range redo {
			again[j] = vi[i]
		}
		if r2, err := h.eng.VerifyBatch(c.ctx, nk, again, o); err == nil {
			for j, i := range redo {
				res[i] = r2[j]
			}
		}
	})
	return h.writeVerdicts(c, items, res, false)
}

// writeVerdicts writes a verify batch's results: valid, key_version,
// error, reference (for HMACs, as Vault, valid only when true).
func (h *Handler) writeVerdicts(c *call, items []item, res []transit.VerifyItemResult, hmac bool) error {
	c.begin()
	c.out = append(c.out, `{"batch_results":[`...)
	j := 0
	for i, it := range items {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, '{')
		msg := c.pre[i]
		var r transit.VerifyItemResult
		if msg == "" {
			r = res[j]
			j++
			if r.Err != nil {
				msg, _ = h.itemError(c, r.Err)
			}
		}
		first := true
		if !hmac || r.Valid && msg == "" {
			c.out = appendBool(c.out, "valid", r.Valid && msg == "", true)
			first = false
		}
		if msg == "" {
			c.out = appendInt(c.out, "key_version", r.KeyVersion, first)
			first = false
		} else {
			c.out = appendStr(c.out, "error", msg, first)
			first = false
			c.o.Failed++
		}
		c.appendReference(it, first)
	}
	c.out = append(c.out, "]}"...)
	c.end()
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
		input, err := c.b64("input", 0, "input")
		if err != nil {
			return badRequest("unable to decode input as base64: " + err.Error())
		}
		mac, _, err := c.str("hmac")
		if err != nil {
			return err
		}
		if input == nil {
			input = []byte{}
		}
		res, err := h.eng.VerifyHMACBytes(k, input, mac, o)
		if nk := h.newer(c, k, err); nk != nil {
			res, err = h.eng.VerifyHMACBytes(nk, input, mac, o)
		}
		if err != nil {
			return err
		}
		return c.valid(res)
	}
	if err := h.batchItems(c, items); err != nil {
		return err
	}
	n := len(items)
	c.pre = slices.Grow(c.pre[:0], n)[:n]
	vi := make([]transit.VerifyHMACItem, 0, n)
	a := c.newArena(0, items, "input")
	for i, it := range items {
		ms := c.req.members(it)
		c.pre[i] = ""
		in, ok, err := itemStr(ms, "input")
		var v transit.VerifyHMACItem
		switch {
		case err != nil:
			c.pre[i] = err.Error()
		case !ok:
			c.pre[i] = "missing input"
		default:
			if v.Input, err = a.decode(in); err != nil {
				c.pre[i] = "unable to decode input as base64: " + err.Error()
				break
			}
			if v.Input == nil {
				v.Input = []byte{}
			}
			if v.HMAC, _, err = itemStr(ms, "hmac"); err != nil {
				c.pre[i] = err.Error()
			}
		}
		if c.pre[i] == "" {
			vi = append(vi, v)
		}
	}
	res, err := h.eng.VerifyHMACBatch(c.ctx, k, vi, o)
	if err != nil {
		return err
	}
	h.retryNewer(c, k, len(res), func(i int) error { return res[i].Err }, func(nk *transit.Key, redo []int) {
		again := make([]transit.VerifyHMACItem, len(redo))
		for j, i := range redo {
			again[j] = vi[i]
		}
		if r2, err := h.eng.VerifyHMACBatch(c.ctx, nk, again, o); err == nil {
			for j, i := range redo {
				res[i] = r2[j]
			}
		}
	})
	return h.writeVerdicts(c, items, res, true)
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
		input, err := c.b64("input", 0, "input")
		if err != nil {
			return badRequest("unable to decode input as base64: " + err.Error())
		}
		if input == nil {
			input = []byte{}
		}
		c.begin()
		c.out = append(c.out, `{"hmac":"`...)
		out, ver, err := h.eng.AppendHMAC(c.out, k, input, o)
		if err != nil {
			return err
		}
		c.out = appendInt(append(out, '"'), "key_version", ver, false)
		c.out = append(c.out, '}')
		c.end()
		c.o.KeyVersion = ver
		return nil
	}
	if err := h.batchItems(c, items); err != nil {
		return err
	}
	n := len(items)
	c.pre = slices.Grow(c.pre[:0], n)[:n]
	inputs := make([][]byte, 0, n)
	a := c.newArena(0, items, "input")
	for i, it := range items {
		c.pre[i] = ""
		in, ok, err := itemStr(c.req.members(it), "input")
		switch {
		case err != nil:
			c.pre[i] = err.Error()
		case !ok:
			c.pre[i] = "missing input for HMAC"
		default:
			b, err := a.decode(in)
			if err != nil {
				c.pre[i] = "unable to decode input as base64: " + err.Error()
				break
			}
			if b == nil {
				b = []byte{}
			}
			inputs = append(inputs, b)
		}
	}
	res, err := h.eng.HMACBatch(c.ctx, k, inputs, o)
	if err != nil {
		return err
	}
	c.begin()
	c.out = append(c.out, `{"batch_results":[`...)
	j := 0
	for i, it := range items {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, '{')
		msg, first := c.pre[i], true
		if msg == "" {
			r := &res[j]
			j++
			if r.Err == nil {
				c.out = appendStr(c.out, "hmac", r.HMAC, true)
				c.out = appendInt(c.out, "key_version", r.KeyVersion, false)
				first = false
			} else {
				msg, _ = h.itemError(c, r.Err)
			}
		}
		if msg != "" {
			c.out = appendStr(c.out, "error", msg, first)
			first = false
			c.o.Failed++
		}
		c.appendReference(it, first)
	}
	c.out = append(c.out, "]}"...)
	c.end()
	return nil
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
	input, err := c.b64("input", 0, "input")
	if err != nil {
		return badRequest("unable to decode input as base64: " + err.Error())
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
