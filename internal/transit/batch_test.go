package transit

import (
	"strings"
	"testing"
)

func TestBatch(t *testing.T) {
	e := New(Options{Rand: seededRand(4), BatchWorkers: 4})
	k := rotated(t, e, AES256GCM96, 2, CreateOptions{})
	const n = 1000
	items := make([]EncryptItem, n)
	for i := range items {
		items[i] = EncryptItem{Plaintext: []byte(strings.Repeat("x", i%50))}
	}
	items[7].KeyVersion = 3 // unknown
	items[8].KeyVersion = 1
	items[9].AssociatedData = []byte("ad")
	res := must[[]EncryptResult](t)(e.EncryptBatch(ctx, k, items, Caller{}))
	for i, r := range res {
		switch i {
		case 7:
			wantReason(t, r.Err, ReasonUnknownVersion)
			continue
		case 8:
			if r.KeyVersion != 1 {
				t.Fatal("item key_version ignored")
			}
		}
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
	dItems := make([]DecryptItem, n)
	for i := range dItems {
		dItems[i] = DecryptItem{Ciphertext: res[i].Ciphertext, AssociatedData: items[i].AssociatedData}
	}
	dItems[3].Ciphertext = []byte("vault:v1:garbage")
	dItems[4].AssociatedData = []byte("wrong")
	dres := must[[]DecryptItemResult](t)(e.DecryptBatch(ctx, k, dItems, Caller{}))
	for i, r := range dres {
		switch i {
		case 3:
			wantReason(t, r.Err, ReasonMalformed)
		case 4:
			wantReason(t, r.Err, ReasonDecryptionFailed)
		case 7:
			wantReason(t, r.Err, ReasonMalformed) // its encryption failed: empty text
		default:
			if r.Err != nil || string(r.Plaintext) != string(items[i].Plaintext) {
				t.Fatalf("item %d: %q %v", i, r.Plaintext, r.Err)
			}
		}
	}
	rItems := make([]RewrapItem, n)
	for i := range rItems {
		rItems[i] = RewrapItem{Ciphertext: res[i].Ciphertext, AssociatedData: items[i].AssociatedData}
	}
	rres := must[[]EncryptResult](t)(e.RewrapBatch(ctx, k, rItems, Caller{}))
	if rres[8].Err != nil || rres[8].KeyVersion != 2 || rres[7].Err == nil {
		t.Fatal("rewrap batch", rres[8].Err)
	}
	inputs := make([][]byte, n)
	for i := range inputs {
		inputs[i] = []byte{byte(i)}
	}
	hres := must[[]HMACResult](t)(e.HMACBatch(ctx, k, inputs, HMACOptions{Algorithm: SHA2_512}))
	vItems := make([]VerifyHMACItem, n)
	for i := range vItems {
		want := must[Result](t)(e.HMAC(k, inputs[i], HMACOptions{Algorithm: SHA2_512})).Text
		if string(hres[i].HMAC) != want {
			t.Fatalf("hmac %d", i)
		}
		vItems[i] = VerifyHMACItem{Input: inputs[i], HMAC: hres[i].HMAC}
	}
	vItems[5].Input = []byte("other")
	vres := must[[]VerifyItemResult](t)(e.VerifyHMACBatch(ctx, k, vItems, HMACOptions{Algorithm: SHA2_512}))
	for i, r := range vres {
		if r.Err != nil || r.Valid != (i != 5) {
			t.Fatalf("verify-hmac item %d: %+v", i, r)
		}
	}

	sk := newKey(t, e, Ed25519, CreateOptions{})
	sItems := make([]SignItem, 64)
	for i := range sItems {
		sItems[i] = SignItem{Input: []byte{byte(i)}}
	}
	sres := must[[]SignItemResult](t)(e.SignBatch(ctx, sk, sItems, SignOptions{}))
	svItems := make([]VerifyItem, len(sItems))
	for i := range svItems {
		svItems[i] = VerifyItem{Input: sItems[i].Input, Signature: sres[i].Signature}
	}
	svItems[1].Signature = []byte("nope")
	svres := must[[]VerifyItemResult](t)(e.VerifyBatch(ctx, sk, svItems, SignOptions{}))
	for i, r := range svres {
		if i == 1 {
			wantReason(t, r.Err, ReasonMalformed)
		} else if r.Err != nil || !r.Valid {
			t.Fatalf("verify item %d: %+v", i, r)
		}
	}

	_, err := e.EncryptBatch(ctx, k, nil, Caller{})
	wantReason(t, err, ReasonInvalidRequest)
	_, err = e.EncryptBatch(ctx, k, make([]EncryptItem, MaxBatchItems+1), Caller{})
	wantReason(t, err, ReasonTooLarge)
	_, err = e.SignBatch(ctx, sk, sItems, SignOptions{HashAlgorithm: HashNone})
	wantReason(t, err, ReasonInvalidRequest)

	canceledCtx, cancel := contextWithCancel()
	cancel()
	cres := must[[]EncryptResult](t)(e.EncryptBatch(canceledCtx, k, items[:10], Caller{}))
	for _, r := range cres {
		wantReason(t, r.Err, ReasonCanceled)
	}
}

// TestBatchCostBudget: a batch is refused with ErrOverBudget when its items
// together cost more than MaxBatchCost, before any of it is done (with the
// only private-key worker held, a batch that started would wait for it);
// batches within the budget run, whatever their number of items. The
// counts are those the cost table puts on either side of the default
// budget.
func TestBatchCostBudget(t *testing.T) {
	e := New(Options{Rand: seededRand(6), PrivateKeyWorkers: 1})
	aes := newKey(t, e, AES256GCM96, CreateOptions{})
	derived := newKey(t, e, AES256GCM96, CreateOptions{Derived: true})
	r2048 := newKey(t, e, RSA2048, CreateOptions{})
	r4096 := newKey(t, e, RSA4096, CreateOptions{})
	p521 := newKey(t, e, ECDSAP521, CreateOptions{})
	g, err := e.work(ctx, nil, Caller{Tenant: "holder"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer g.done()
	signs := func(n int) []SignItem { return make([]SignItem, n) }
	for _, tc := range []struct {
		name string
		run  func() error
		over bool
	}{
		{"10,000 aes encryptions", func() error {
			_, err := e.EncryptBatch(ctx, aes, make([]EncryptItem, 10_000), Caller{})
			return err
		}, false},
		{"59,000 derived aes decryptions", func() error {
			_, err := e.DecryptBatch(ctx, derived, make([]DecryptItem, 59_000), Caller{})
			return err
		}, true},
		{"10,000 hmacs with an rsa-4096 key", func() error {
			_, err := e.HMACBatch(ctx, r4096, make([][]byte, 10_000), HMACOptions{})
			return err
		}, false},
		{"300 rsa-2048 signatures", func() error {
			_, err := e.SignBatch(ctx, r2048, signs(300), SignOptions{})
			return err
		}, true},
		{"41 rsa-4096 signatures", func() error {
			_, err := e.SignBatch(ctx, r4096, signs(41), SignOptions{})
			return err
		}, true},
		{"41 rsa-4096 decryptions", func() error {
			_, err := e.DecryptBatch(ctx, r4096, make([]DecryptItem, 41), Caller{})
			return err
		}, true},
		{"39 rsa-4096 rewraps", func() error {
			_, err := e.RewrapBatch(ctx, r4096, make([]RewrapItem, 39), Caller{})
			return err
		}, true},
		{"104 ecdsa-p521 verifications", func() error {
			_, err := e.VerifyBatch(ctx, p521, make([]VerifyItem, 104), SignOptions{})
			return err
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.over {
				if err := tc.run(); err != nil {
					t.Fatal(err)
				}
				return
			}
			err := tc.run()
			wantReason(t, err, ReasonOverBudget)
			if !strings.Contains(err.Error(), "over the limit of 1000000") {
				t.Errorf("the error does not say the limit: %v", err)
			}
		})
	}
}

// TestCostTable: every operation a key type supports has a cost, and so
// have generating a key of the type and deriving one of a type that can be
// derived; a type added without them would be charged 1 for work that may
// cost thousands.
func TestCostTable(t *testing.T) {
	for _, typ := range KeyTypes() {
		c := typ.Capabilities()
		for _, tc := range []struct {
			op  op
			has bool
		}{{opEncrypt, c.Encryption}, {opDecrypt, c.Decryption}, {opSign, c.Signing}, {opVerify, c.Signing}, {opHMAC, c.HMAC}, {opGenerate, true}} {
			if tc.has && costs[typ][tc.op] < 1 {
				t.Errorf("%v %s has no cost", typ, opNames[tc.op])
			}
		}
		if c.Derivation && derivedCost[typ] < 1 {
			t.Errorf("%v derivation has no cost", typ)
		}
		k := &Key{cfg: Config{Type: typ, Derived: c.Derivation}}
		if got, want := k.cost(opRewrap), k.cost(opDecrypt)+k.cost(opEncrypt); c.Encryption && got != want {
			t.Errorf("%v rewrap costs %d, not decryption and encryption's %d", typ, got, want)
		}
		// Every asymmetric operation, an asymmetric key's generation
		// included, waits for a worker; no symmetric one, derived or not,
		// and no HMAC does.
		asym := c.Signing || typ.isRSA()
		for _, derived := range []bool{false, c.Derivation} {
			k := &Key{cfg: Config{Type: typ, Derived: derived}}
			for _, tc := range []struct {
				op   op
				want bool
			}{{opSign, c.Signing}, {opVerify, c.Signing}, {opEncrypt, asym && c.Encryption}, {opDecrypt, asym && c.Decryption},
				{opRewrap, asym && c.Encryption}, {opHMAC, false}, {opGenerate, asym}} {
				if got := k.pooled(tc.op); got != tc.want {
					t.Errorf("%v (derived %v) %s: pooled %v, want %v (cost %d)", typ, derived, opNames[tc.op], got, tc.want, k.cost(tc.op))
				}
			}
		}
	}
}
