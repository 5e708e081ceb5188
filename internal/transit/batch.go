package transit

import (
	"context"
	"encoding/base64"
	"io"
	"slices"
)

// Batches run their items across the cores (Options.BatchWorkers), each
// item on its own: one bad item gets its own Err and never fails the
// others, and results come back in the items' order. Small batches of cheap
// items run on the calling goroutine; no batch starts a goroutine per item.
// A batch fails as a whole only when it is empty, over MaxBatchItems or over
// the cost budget (ErrOverBudget), when its shared options are invalid, or,
// for work on the pool (see pooled), when its caller already has as much in
// progress as it may (ErrBusy). Its pooled items each wait for a worker in
// the caller's turn, never holding one for the whole batch. Items still waiting
// when ctx ends get ErrCanceled.
//
// The encrypt, decrypt, rewrap and hmac results point into one buffer the
// batch allocates for all of them.

// cheapChunk is how many AEAD or HMAC items a goroutine takes at a time;
// expensiveChunk is for signatures and RSA.
const (
	cheapChunk     = 32
	expensiveChunk = 1
)

func canceled(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return wrapError(ReasonCanceled, "the batch's context ended", err)
	}
	return nil
}

func (k *Key) chunkFor() int {
	if k.cfg.Type.isRSA() {
		return expensiveChunk
	}
	return cheapChunk
}

// enter takes the ticket a batch of o with k holds for its items, if they
// run on the pool; leave gives it back.
func (e *Engine) enter(k *Key, o op, who Caller) (*ticket, func(), error) {
	if !k.pooled(o) {
		return nil, func() {}, nil
	}
	t, err := e.pool.enter(who)
	if err != nil {
		return nil, nil, err
	}
	return &t, t.leave, nil
}

// EncryptItem is one item of an encrypt batch.
type EncryptItem struct {
	Plaintext      []byte
	Context        []byte
	AssociatedData []byte
	KeyVersion     int
}

// EncryptResult is one result: the ciphertext text, or Err.
type EncryptResult struct {
	Ciphertext []byte
	KeyVersion int
	Err        error
}

// EncryptBatch encrypts every item with k for who (whose turn RSA
// encryptions wait for).
func (e *Engine) EncryptBatch(ctx context.Context, k *Key, items []EncryptItem, who Caller) ([]EncryptResult, error) {
	res, _, err := e.EncryptBatchInto(ctx, k, items, who, nil, nil)
	return res, err
}

// EncryptBatchInto is EncryptBatch reusing the storage of res and buf (the
// texts go into buf) when they are large enough, so that a caller pooling
// them encrypts a batch without allocating. It returns both, resliced.
func (e *Engine) EncryptBatchInto(ctx context.Context, k *Key, items []EncryptItem, who Caller, res []EncryptResult, buf []byte) ([]EncryptResult, []byte, error) {
	if err := e.checkBatch(len(items), k, opEncrypt); err != nil {
		return res, buf, err
	}
	t, leave, err := e.enter(k, opEncrypt, who)
	if err != nil {
		return res, buf, err
	}
	defer leave()
	res = slices.Grow(res[:0], len(items))[:len(items)]
	// Size every item's text first, so that all of them fit one buffer;
	// after them come the nonces, read from the random source at once
	// rather than one read per item.
	total := 0
	for i := range items {
		if v, err := k.encryptVersion(items[i].KeyVersion); err == nil && len(items[i].Plaintext) <= MaxInputBytes {
			total += textLen(v.num, k.sealLen(v, len(items[i].Plaintext)))
		}
	}
	ns := 0
	if k.cfg.Type.symmetricAEAD() && !k.cfg.ConvergentEncryption {
		ns = k.latest().aead.NonceSize()
	}
	buf = slices.Grow(buf[:0], total+ns*len(items))[:total+ns*len(items)]
	nonces := buf[total:]
	if _, err := io.ReadFull(e.rand, nonces); err != nil {
		return res, buf[:0], wrapError(ReasonInternal, "random source", err)
	}
	off := 0
	for i := range items {
		size := 0
		if v, err := k.encryptVersion(items[i].KeyVersion); err == nil && len(items[i].Plaintext) <= MaxInputBytes {
			size = textLen(v.num, k.sealLen(v, len(items[i].Plaintext)))
		}
		res[i] = EncryptResult{Ciphertext: buf[off : off : off+size]}
		off += size
	}
	e.parallel(len(items), k.chunkFor(), func(i int) {
		if err := canceled(ctx); err != nil {
			res[i] = EncryptResult{Err: err}
			return
		}
		it := &items[i]
		o := EncryptOptions{KeyVersion: it.KeyVersion, Context: it.Context, AssociatedData: it.AssociatedData, ticket: t}
		var (
			out []byte
			v   *Version
			n   int
		)
		err := k.checkEncrypt(it.Plaintext, &o)
		if err == nil {
			v, err = k.encryptVersion(it.KeyVersion)
		}
		if err == nil {
			out, n, err = e.appendEncrypt(ctx, res[i].Ciphertext, k, v, it.Plaintext, &o, nonces[i*ns:(i+1)*ns])
		}
		if err != nil {
			out = nil
		}
		res[i] = EncryptResult{Ciphertext: out, KeyVersion: n, Err: err}
	}, func(i int, err error) { res[i] = EncryptResult{Err: err} })
	clear(nonces)
	return res, buf[:total], nil
}

// DecryptItem is one item of a decrypt batch.
type DecryptItem struct {
	Ciphertext     []byte
	Context        []byte
	AssociatedData []byte
}

// DecryptItemResult is one result: the plaintext and the version that
// encrypted it, or Err.
type DecryptItemResult struct {
	Plaintext  []byte
	KeyVersion int
	Err        error
}

// DecryptBatch decrypts every item with k for who. Each ciphertext is
// decrypted with exactly the version it names.
func (e *Engine) DecryptBatch(ctx context.Context, k *Key, items []DecryptItem, who Caller) ([]DecryptItemResult, error) {
	if err := e.checkBatch(len(items), k, opDecrypt); err != nil {
		return nil, err
	}
	t, leave, err := e.enter(k, opDecrypt, who)
	if err != nil {
		return nil, err
	}
	defer leave()
	res := make([]DecryptItemResult, len(items))
	ends := make([]int, len(items))
	total := 0
	for i := range items {
		if n := len(items[i].Ciphertext); n <= MaxInputBytes {
			total += base64.StdEncoding.DecodedLen(n)
		}
		ends[i] = total
	}
	buf := make([]byte, total)
	e.parallel(len(items), k.chunkFor(), func(i int) {
		if err := canceled(ctx); err != nil {
			res[i].Err = err
			return
		}
		it := &items[i]
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		o := DecryptOptions{Context: it.Context, AssociatedData: it.AssociatedData, ticket: t}
		out, n, err := e.AppendDecrypt(ctx, buf[start:start:ends[i]], k, it.Ciphertext, o)
		if err == nil && out == nil {
			out = []byte{}
		}
		res[i] = DecryptItemResult{Plaintext: out, KeyVersion: n, Err: err}
	}, func(i int, err error) { res[i] = DecryptItemResult{Err: err} })
	return res, nil
}

// RewrapItem is one item of a rewrap batch.
type RewrapItem struct {
	Ciphertext     []byte
	Context        []byte
	AssociatedData []byte
	KeyVersion     int
}

// RewrapBatch re-encrypts every item under its requested version (the
// latest by default), for who.
func (e *Engine) RewrapBatch(ctx context.Context, k *Key, items []RewrapItem, who Caller) ([]EncryptResult, error) {
	if err := e.checkBatch(len(items), k, opRewrap); err != nil {
		return nil, err
	}
	t, leave, err := e.enter(k, opDecrypt, who)
	if err != nil {
		return nil, err
	}
	defer leave()
	res := make([]EncryptResult, len(items))
	ends := make([]int, len(items))
	total := 0
	for i := range items {
		if v, err := k.encryptVersion(items[i].KeyVersion); err == nil && len(items[i].Ciphertext) <= MaxInputBytes {
			// The new payload is as long as the old one for the AEAD
			// types (same nonce and tag sizes) and the modulus for RSA.
			payload := base64.StdEncoding.DecodedLen(len(items[i].Ciphertext))
			if v.typ.isRSA() {
				payload = v.rsaPub.Size()
			}
			total += textLen(v.num, payload)
		}
		ends[i] = total
	}
	buf := make([]byte, total)
	e.parallel(len(items), k.chunkFor(), func(i int) {
		if err := canceled(ctx); err != nil {
			res[i].Err = err
			return
		}
		it := &items[i]
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		o := RewrapOptions{KeyVersion: it.KeyVersion, Context: it.Context, AssociatedData: it.AssociatedData, ticket: t}
		out, n, err := e.AppendRewrap(ctx, buf[start:start:ends[i]], k, it.Ciphertext, o)
		res[i] = EncryptResult{Ciphertext: out, KeyVersion: n, Err: err}
	}, func(i int, err error) { res[i] = EncryptResult{Err: err} })
	return res, nil
}

// SignItem is one item of a sign batch; the other parameters are the
// batch's (as in Vault).
type SignItem struct {
	Input   []byte
	Context []byte
}

// SignItemResult is one result: the signature text, or Err.
type SignItemResult struct {
	Signature  []byte
	KeyVersion int
	PublicKey  []byte
	Err        error
}

// SignBatch signs every item with o (KeyVersion, hash, marshaling, Caller,
// …).
func (e *Engine) SignBatch(ctx context.Context, k *Key, items []SignItem, o SignOptions) ([]SignItemResult, error) {
	if err := e.checkBatch(len(items), k, opSign); err != nil {
		return nil, err
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	t, leave, err := e.enter(k, opSign, o.Caller)
	if err != nil {
		return nil, err
	}
	defer leave()
	o.ticket = t
	res := make([]SignItemResult, len(items))
	e.parallel(len(items), expensiveChunk, func(i int) {
		if err := canceled(ctx); err != nil {
			res[i].Err = err
			return
		}
		opt := o
		opt.Context = items[i].Context
		out, n, pub, err := e.appendSign(ctx, nil, k, items[i].Input, &opt)
		res[i] = SignItemResult{Signature: out, KeyVersion: n, PublicKey: pub, Err: err}
	}, func(i int, err error) { res[i] = SignItemResult{Err: err} })
	return res, nil
}

// VerifyItem is one item of a verify batch.
type VerifyItem struct {
	Input     []byte
	Signature []byte
	Context   []byte
}

// VerifyItemResult is one verdict, or Err.
type VerifyItemResult struct {
	Valid      bool
	KeyVersion int
	Err        error
}

// VerifyBatch verifies every item with o (hash, marshaling, Caller, …).
func (e *Engine) VerifyBatch(ctx context.Context, k *Key, items []VerifyItem, o SignOptions) ([]VerifyItemResult, error) {
	if err := e.checkBatch(len(items), k, opVerify); err != nil {
		return nil, err
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	t, leave, err := e.enter(k, opVerify, o.Caller)
	if err != nil {
		return nil, err
	}
	defer leave()
	o.ticket = t
	res := make([]VerifyItemResult, len(items))
	e.parallel(len(items), expensiveChunk, func(i int) {
		if err := canceled(ctx); err != nil {
			res[i].Err = err
			return
		}
		opt := o
		opt.Context = items[i].Context
		r, err := verifySig(e, ctx, k, items[i].Input, items[i].Signature, &opt)
		res[i] = VerifyItemResult{Valid: r.Valid, KeyVersion: r.KeyVersion, Err: err}
	}, func(i int, err error) { res[i] = VerifyItemResult{Err: err} })
	return res, nil
}

// HMACResult is one result of an hmac batch: the HMAC text, or Err.
type HMACResult struct {
	HMAC       []byte
	KeyVersion int
	Err        error
}

// HMACBatch computes the HMAC of every input with o.
func (e *Engine) HMACBatch(ctx context.Context, k *Key, inputs [][]byte, o HMACOptions) ([]HMACResult, error) {
	if err := e.checkBatch(len(inputs), k, opHMAC); err != nil {
		return nil, err
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	v, err := k.hmacVersion(o.KeyVersion)
	if err != nil {
		return nil, err
	}
	per := textLen(v.num, o.Algorithm.Size())
	buf := make([]byte, per*len(inputs))
	res := make([]HMACResult, len(inputs))
	e.parallel(len(inputs), cheapChunk, func(i int) {
		if err := canceled(ctx); err != nil {
			res[i].Err = err
			return
		}
		out, n, err := e.AppendHMAC(buf[i*per:i*per:(i+1)*per], k, inputs[i], o)
		res[i] = HMACResult{HMAC: out, KeyVersion: n, Err: err}
	}, func(i int, err error) { res[i] = HMACResult{Err: err} })
	return res, nil
}

// VerifyHMACItem is one item of a verify-hmac batch.
type VerifyHMACItem struct {
	Input []byte
	HMAC  []byte
}

// VerifyHMACBatch checks every item's HMAC with o (constant-time).
func (e *Engine) VerifyHMACBatch(ctx context.Context, k *Key, items []VerifyHMACItem, o HMACOptions) ([]VerifyItemResult, error) {
	if err := e.checkBatch(len(items), k, opHMAC); err != nil {
		return nil, err
	}
	if err := o.defaults(); err != nil {
		return nil, err
	}
	res := make([]VerifyItemResult, len(items))
	e.parallel(len(items), cheapChunk, func(i int) {
		if err := canceled(ctx); err != nil {
			res[i].Err = err
			return
		}
		opt := o
		r, err := verifyHMAC(k, items[i].Input, items[i].HMAC, &opt)
		res[i] = VerifyItemResult{Valid: r.Valid, KeyVersion: r.KeyVersion, Err: err}
	}, func(i int, err error) { res[i] = VerifyItemResult{Err: err} })
	return res, nil
}
