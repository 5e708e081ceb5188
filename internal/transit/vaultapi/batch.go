package vaultapi

import (
	"encoding/base64"
	"errors"
	"net/http"
	"slices"

	"github.com/keygate/keygate/internal/transit"
)

// Batches: batch_input's items are read into the engine's item type, each
// with its own error when it cannot be (c.pre), the good ones run through
// the engine's batch call, and batch_results are written in the items'
// order with an error or the result of each, and its reference echoed.

// errContextMix is Vault's rule that a batch gives a context in every
// item or in none.
var errContextMix = badRequest("context should be set either in all the request blocks or in none")

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

// member decodes an item's base64 member (absent: nil).
func (a *arena) member(ms []member, name string) ([]byte, error) {
	s, _, err := itemStr(ms, name)
	if err != nil {
		return nil, err
	}
	b, err := a.decode(s)
	if err != nil {
		return nil, errors.New("failed to base64-decode " + name + ": " + err.Error())
	}
	return b, nil
}

// members decodes an item's context and associated_data.
func (a *arena) members(ms []member, context, ad *[]byte) (err error) {
	if *context, err = a.member(ms, "context"); err != nil {
		return err
	}
	*ad, err = a.member(ms, "associated_data")
	return err
}

// input decodes an item's input, which it must have ("" or the item's
// error).
func (a *arena) input(ms []member, missing string) ([]byte, string) {
	in, ok, err := itemStr(ms, "input")
	switch {
	case err != nil:
		return nil, err.Error()
	case !ok:
		return nil, missing
	}
	b, err := a.decode(in)
	if err != nil {
		return nil, "unable to decode input as base64: " + err.Error()
	}
	if b == nil {
		b = []byte{}
	}
	return b, ""
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

// itemVersion reads an item's key_version (absent: 0).
func itemVersion(ms []member) (int, error) {
	if m := get(ms, "key_version"); m != nil {
		return m.integer()
	}
	return 0, nil
}

// readBatch checks the batch's size and reads its items with parse,
// which returns the item or its error message, into dst; the base64
// members named are decoded into one arena.
func readBatch[T any](h *Handler, c *call, items []item, dst []T, b64 []string, parse func(i int, ms []member, a *arena) (T, string)) ([]T, error) {
	switch {
	case len(items) == 0:
		return nil, badRequest("missing batch input to process")
	case len(items) > h.maxBatch:
		return nil, errBatchLarge
	}
	c.o.Items = len(items)
	n := 0
	for _, it := range items {
		for _, name := range b64 {
			if m := get(c.req.members(it), name); m != nil && m.kind == kString {
				n += base64.StdEncoding.DecodedLen(len(m.text))
			}
		}
	}
	c.scratch[0] = slices.Grow(c.scratch[0][:0], n)
	a := &arena{b: c.scratch[0][:0:n]}
	c.pre = slices.Grow(c.pre[:0], len(items))[:len(items)]
	dst = dst[:0]
	for i, it := range items {
		v, msg := parse(i, c.req.members(it), a)
		if c.pre[i] = msg; msg == "" {
			dst = append(dst, v)
		}
	}
	return dst, nil
}

// contextSet checks Vault's context rule over a batch and returns whether
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

// emptied is err of an engine batch call, but nil when no item reached
// the engine: every one failed as it was read (c.pre says why), and the
// engine's refusal of an empty batch would hide those errors behind
// "missing batch input".
func emptied[I any](items []I, err error) error {
	if len(items) == 0 {
		return nil
	}
	return err
}

// shape is how an operation writes one result of batch_results.
type shape[R any] struct {
	err func(*R) error
	// ok appends the fields of a result that succeeded (at least one,
	// without a leading comma).
	ok func(b []byte, r *R) []byte
	// failed, if set, is written before "error" in a result that failed
	// (Vault's decrypt keeps "plaintext":"" there).
	failed string
}

// outcome is what a batch's results came to, for its status.
type outcome struct{ ok, userErr, internalErr bool }

// writeBatch writes the answer of a batch: the results res of the items
// without an error in c.pre, in the items' order, each with its reference.
func writeBatch[R any](h *Handler, c *call, items []item, res []R, s shape[R]) outcome {
	var o outcome
	c.begin()
	c.out = append(c.out, `{"batch_results":[`...)
	j := 0
	for i, it := range items {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, '{')
		msg, user := c.pre[i], true
		if msg == "" {
			r := &res[j]
			j++
			if err := s.err(r); err != nil {
				msg, user = h.itemError(c, err)
			} else {
				c.out = s.ok(c.out, r)
				o.ok = true
			}
		}
		if msg != "" {
			if s.failed != "" {
				c.out = append(append(c.out, s.failed...), ',')
			}
			c.out = appendStr(c.out, "error", msg, true)
			c.o.Failed++
			o.userErr, o.internalErr = o.userErr || user, o.internalErr || !user
		}
		ref, _, _ := itemStr(c.req.members(it), "reference")
		c.out = append(appendStr(c.out, "reference", ref, false), '}')
	}
	c.out = append(c.out, "]}"...)
	return o
}

// finishBatch ends the answer of an encrypt or decrypt batch with Vault's
// status: 400 when an item failed by the caller's fault, else 500 when one
// failed by the service's, unless some succeeded and the request gave
// partial_failure_response_code. (Vault answers every other batch 200.)
// The code must be a final status, 200 to 599: Vault takes 1 to 599, but
// net/http refuses a code below 100 (a panic) and reads 1xx as
// informational, not as the answer. Another is ignored with Vault's
// warning.
func (h *Handler) finishBatch(c *call, o outcome) error {
	defer c.end() // after the status: it may add a warning
	if !o.userErr && !o.internalErr {
		return nil
	}
	code := http.StatusBadRequest
	if !o.userErr {
		code = http.StatusInternalServerError
	}
	if m := c.req.get("partial_failure_response_code"); m != nil && o.ok {
		n, err := m.integer()
		if err != nil {
			return err
		}
		if n < 200 || n > 599 {
			c.warnings = append(c.warnings, "invalid HTTP response code override from partial_failure_response_code, reverting to "+itoa(code))
		} else {
			code = n
		}
	}
	c.status = code
	return nil
}

// retryNewer runs again, with the key re-read, the items whose results
// failed because their text named a version newer than k's latest:
// another node rotated the key.
func retryNewer[I, R any](h *Handler, c *call, k *transit.Key, items []I, res []R, errOf func(*R) error, run func(*transit.Key, []I) ([]R, error)) {
	var idx []int
	var newest error
	for i := range res {
		if err := errOf(&res[i]); errors.Is(err, transit.ErrUnknownVersion) {
			if newest == nil || versionOf(err) > versionOf(newest) {
				newest = err
			}
			idx = append(idx, i)
		}
	}
	nk := h.newer(c, k, newest)
	if nk == nil {
		return
	}
	again := make([]I, len(idx))
	for j, i := range idx {
		again[j] = items[i]
	}
	if r2, err := run(nk, again); err == nil {
		for j, i := range idx {
			res[i] = r2[j]
		}
	}
}

func versionOf(err error) int {
	var te *transit.Error
	if errors.As(err, &te) {
		return te.Version
	}
	return 0
}

// Result shapes, as Vault writes them (with key_version added to every
// result).
var (
	encryptShape = shape[transit.EncryptResult]{
		err: func(r *transit.EncryptResult) error { return r.Err },
		ok: func(b []byte, r *transit.EncryptResult) []byte {
			return appendInt(appendStr(b, "ciphertext", r.Ciphertext, true), "key_version", r.KeyVersion, false)
		},
	}
	// rewrapShape is encryptShape, its errors naming the ciphertext.
	rewrapShape = shape[transit.EncryptResult]{
		err: func(r *transit.EncryptResult) error { return inField("ciphertext", r.Err) },
		ok:  func(b []byte, r *transit.EncryptResult) []byte { return encryptShape.ok(b, r) },
	}
	decryptShape = shape[transit.DecryptItemResult]{
		err: func(r *transit.DecryptItemResult) error { return inField("ciphertext", r.Err) },
		ok: func(b []byte, r *transit.DecryptItemResult) []byte {
			b = base64.StdEncoding.AppendEncode(append(b, `"plaintext":"`...), r.Plaintext)
			clear(r.Plaintext)
			return appendInt(append(b, '"'), "key_version", r.KeyVersion, false)
		},
		failed: `"plaintext":""`,
	}
	signShape = shape[transit.SignItemResult]{
		err: func(r *transit.SignItemResult) error { return r.Err },
		ok: func(b []byte, r *transit.SignItemResult) []byte {
			b = appendInt(appendStr(b, "signature", r.Signature, true), "key_version", r.KeyVersion, false)
			if len(r.PublicKey) > 0 { // Vault's batch spells it publickey
				b = append(appendKey(b, "publickey", false), '"')
				b = append(base64.StdEncoding.AppendEncode(b, r.PublicKey), '"')
			}
			return b
		},
		failed: `"key_version":0`,
	}
	verifyShape = shape[transit.VerifyItemResult]{
		err: func(r *transit.VerifyItemResult) error { return inField("signature", r.Err) },
		ok: func(b []byte, r *transit.VerifyItemResult) []byte {
			return appendInt(appendBool(b, "valid", r.Valid, true), "key_version", r.KeyVersion, false)
		},
		failed: `"valid":false`,
	}
	// verifyHMACShape: Vault writes "valid" of an HMAC only when true.
	verifyHMACShape = shape[transit.VerifyItemResult]{
		err: func(r *transit.VerifyItemResult) error { return inField("hmac", r.Err) },
		ok: func(b []byte, r *transit.VerifyItemResult) []byte {
			if r.Valid {
				b = appendBool(b, "valid", true, true)
			}
			return appendInt(b, "key_version", r.KeyVersion, !r.Valid)
		},
	}
	hmacShape = shape[transit.HMACResult]{
		err: func(r *transit.HMACResult) error { return r.Err },
		ok: func(b []byte, r *transit.HMACResult) []byte {
			return appendInt(appendStr(b, "hmac", r.HMAC, true), "key_version", r.KeyVersion, false)
		},
	}
)

func (h *Handler) encryptBatch(c *call, items []item) error {
	ctxSet, err := c.contextSet(items)
	if err != nil {
		return err
	}
	c.encItems, err = readBatch(h, c, items, c.encItems, []string{"plaintext", "context", "associated_data"},
		func(i int, ms []member, a *arena) (e transit.EncryptItem, msg string) {
			p64, ok, err := itemStr(ms, "plaintext")
			switch {
			case err != nil:
				return e, err.Error()
			case !ok:
				return e, "'[" + itoa(i) + "].plaintext' missing plaintext to encrypt"
			}
			if e.Plaintext, err = a.decode(p64); err != nil {
				return e, "failed to base64-decode plaintext: " + err.Error()
			}
			if e.Plaintext == nil {
				e.Plaintext = []byte{}
			}
			if err := a.members(ms, &e.Context, &e.AssociatedData); err != nil {
				return e, err.Error()
			}
			if e.KeyVersion, err = itemVersion(ms); err != nil {
				return e, err.Error()
			}
			return e, ""
		})
	if err != nil {
		return err
	}
	k, err := h.encryptKey(c, ctxSet)
	if err != nil {
		return err
	}
	res, buf, err := h.eng.EncryptBatchInto(c.ctx, k, c.encItems, c.caller(), c.encRes, c.scratch[1])
	c.encRes, c.scratch[1] = res, buf
	if err = emptied(c.encItems, err); err != nil {
		return err
	}
	return h.finishBatch(c, writeBatch(h, c, items, res, encryptShape))
}

func (h *Handler) decryptBatch(c *call, items []item) error {
	if _, err := c.contextSet(items); err != nil {
		return err
	}
	dec, err := readBatch(h, c, items, []transit.DecryptItem(nil), []string{"context", "associated_data"},
		func(_ int, ms []member, a *arena) (d transit.DecryptItem, msg string) {
			ct, _, err := itemStr(ms, "ciphertext")
			switch {
			case err != nil:
				return d, err.Error()
			case len(ct) == 0:
				return d, "missing ciphertext to decrypt"
			}
			d.Ciphertext = ct
			if err := a.members(ms, &d.Context, &d.AssociatedData); err != nil {
				return d, err.Error()
			}
			return d, ""
		})
	if err != nil {
		return err
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	res, err := h.eng.DecryptBatch(c.ctx, k, dec, c.caller())
	if err = emptied(dec, err); err != nil {
		return err
	}
	retryNewer(h, c, k, dec, res, decryptShape.err, func(nk *transit.Key, again []transit.DecryptItem) ([]transit.DecryptItemResult, error) {
		return h.eng.DecryptBatch(c.ctx, nk, again, c.caller())
	})
	return h.finishBatch(c, writeBatch(h, c, items, res, decryptShape))
}

func (h *Handler) rewrapBatch(c *call, items []item) error {
	if _, err := c.contextSet(items); err != nil {
		return err
	}
	rw, err := readBatch(h, c, items, []transit.RewrapItem(nil), []string{"context", "associated_data"},
		func(_ int, ms []member, a *arena) (r transit.RewrapItem, msg string) {
			ct, _, err := itemStr(ms, "ciphertext")
			switch {
			case err != nil:
				return r, err.Error()
			case len(ct) == 0:
				return r, "missing ciphertext to decrypt"
			}
			r.Ciphertext = ct
			if err := a.members(ms, &r.Context, &r.AssociatedData); err != nil {
				return r, err.Error()
			}
			if r.KeyVersion, err = itemVersion(ms); err != nil {
				return r, err.Error()
			}
			return r, ""
		})
	if err != nil {
		return err
	}
	k, err := h.key(c)
	if err != nil {
		return err
	}
	res, err := h.eng.RewrapBatch(c.ctx, k, rw, c.caller())
	if err = emptied(rw, err); err != nil {
		return err
	}
	retryNewer(h, c, k, rw, res, rewrapShape.err, func(nk *transit.Key, again []transit.RewrapItem) ([]transit.EncryptResult, error) {
		return h.eng.RewrapBatch(c.ctx, nk, again, c.caller())
	})
	writeBatch(h, c, items, res, rewrapShape)
	c.end()
	return nil
}

func (h *Handler) signBatch(c *call, k *transit.Key, items []item, o transit.SignOptions) error {
	si, err := readBatch(h, c, items, []transit.SignItem(nil), []string{"input", "context"},
		func(_ int, ms []member, a *arena) (s transit.SignItem, msg string) {
			if s.Input, msg = a.input(ms, "missing input"); msg != "" {
				return s, msg
			}
			var err error
			if s.Context, err = a.member(ms, "context"); err != nil {
				return s, "failed to base64-decode context"
			}
			return s, ""
		})
	if err != nil {
		return err
	}
	res, err := h.eng.SignBatch(c.ctx, k, si, o)
	if err = emptied(si, err); err != nil {
		return err
	}
	writeBatch(h, c, items, res, signShape)
	c.end()
	return nil
}

func (h *Handler) verifyBatch(c *call, k *transit.Key, items []item, o transit.SignOptions) error {
	vi, err := readBatch(h, c, items, []transit.VerifyItem(nil), []string{"input", "context"},
		func(_ int, ms []member, a *arena) (v transit.VerifyItem, msg string) {
			if v.Input, msg = a.input(ms, "missing input"); msg != "" {
				return v, msg
			}
			var err error
			if v.Signature, _, err = itemStr(ms, "signature"); err != nil {
				return v, err.Error()
			}
			if v.Context, err = a.member(ms, "context"); err != nil {
				return v, "failed to base64-decode context"
			}
			return v, ""
		})
	if err != nil {
		return err
	}
	res, err := h.eng.VerifyBatch(c.ctx, k, vi, o)
	if err = emptied(vi, err); err != nil {
		return err
	}
	retryNewer(h, c, k, vi, res, verifyShape.err, func(nk *transit.Key, again []transit.VerifyItem) ([]transit.VerifyItemResult, error) {
		return h.eng.VerifyBatch(c.ctx, nk, again, o)
	})
	writeBatch(h, c, items, res, verifyShape)
	c.end()
	return nil
}

func (h *Handler) verifyHMACBatch(c *call, k *transit.Key, items []item, o transit.HMACOptions) error {
	vi, err := readBatch(h, c, items, []transit.VerifyHMACItem(nil), []string{"input"},
		func(_ int, ms []member, a *arena) (v transit.VerifyHMACItem, msg string) {
			if v.Input, msg = a.input(ms, "missing input"); msg != "" {
				return v, msg
			}
			var err error
			if v.HMAC, _, err = itemStr(ms, "hmac"); err != nil {
				return v, err.Error()
			}
			return v, ""
		})
	if err != nil {
		return err
	}
	res, err := h.eng.VerifyHMACBatch(c.ctx, k, vi, o)
	if err = emptied(vi, err); err != nil {
		return err
	}
	retryNewer(h, c, k, vi, res, verifyHMACShape.err, func(nk *transit.Key, again []transit.VerifyHMACItem) ([]transit.VerifyItemResult, error) {
		return h.eng.VerifyHMACBatch(c.ctx, nk, again, o)
	})
	writeBatch(h, c, items, res, verifyHMACShape)
	c.end()
	return nil
}

func (h *Handler) hmacBatch(c *call, k *transit.Key, items []item, o transit.HMACOptions) error {
	inputs, err := readBatch(h, c, items, [][]byte(nil), []string{"input"},
		func(_ int, ms []member, a *arena) ([]byte, string) { return a.input(ms, "missing input for HMAC") })
	if err != nil {
		return err
	}
	res, err := h.eng.HMACBatch(c.ctx, k, inputs, o)
	if err = emptied(inputs, err); err != nil {
		return err
	}
	writeBatch(h, c, items, res, hmacShape)
	c.end()
	return nil
}
