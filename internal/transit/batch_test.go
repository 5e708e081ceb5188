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
	res := must[[]EncryptResult](t)(e.EncryptBatch(ctx, k, items))
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
	dres := must[[]DecryptItemResult](t)(e.DecryptBatch(ctx, k, dItems))
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
	rres := must[[]EncryptResult](t)(e.RewrapBatch(ctx, k, rItems))
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

	_, err := e.EncryptBatch(ctx, k, nil)
	wantReason(t, err, ReasonInvalidRequest)
	_, err = e.EncryptBatch(ctx, k, make([]EncryptItem, MaxBatchItems+1))
	wantReason(t, err, ReasonTooLarge)
	_, err = e.SignBatch(ctx, sk, sItems, SignOptions{HashAlgorithm: HashNone})
	wantReason(t, err, ReasonInvalidRequest)

	canceledCtx, cancel := contextWithCancel()
	cancel()
	cres := must[[]EncryptResult](t)(e.EncryptBatch(canceledCtx, k, items[:10]))
	for _, r := range cres {
		wantReason(t, r.Err, ReasonCanceled)
	}
}
