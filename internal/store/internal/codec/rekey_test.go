package codec

import (
	"reflect"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

// FuzzDecodeRekey: whatever the rekey row's body holds, decoding it is an
// error or a state that encodes and decodes to itself; never a panic.
func FuzzDecodeRekey(f *testing.F) {
	seed, err := EncodeRekey(store.Rekey{ID: "a1", State: store.RekeyRewrapping, OldKeyID: "00000001", NewKeyID: "00000002",
		NewByOld: []byte{1}, OldByNew: []byte{2}, Header: []byte("{}"), Rate: 3, Done: 1, Total: 2,
		StartedAt: time.Unix(1700000000, 5).UTC()})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"id":"x","state":"done"}`))
	f.Add([]byte(`{"state":`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRekey(body, 7)
		if err != nil {
			return
		}
		again, err := EncodeRekey(r)
		if err != nil {
			return // a body no node writes (an unknown state): refused on the way back
		}
		r2, err := DecodeRekey(again, 7)
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		if !reflect.DeepEqual(normal(r), normal(r2)) {
			t.Fatalf("round trip changed the state:\n%+v\n%+v", r, r2)
		}
	})
}

// normal puts a state's times in UTC, as EncodeRekey writes them.
func normal(r store.Rekey) store.Rekey {
	r.LeaseUntil, r.StartedAt, r.UpdatedAt, r.FinishedAt = r.LeaseUntil.UTC(), r.StartedAt.UTC(), r.UpdatedAt.UTC(), r.FinishedAt.UTC()
	return r
}

// FuzzDecodeTenantRekey: whatever a tenant_rekeys row's body holds,
// decoding it is an error or a state that encodes and decodes to itself.
func FuzzDecodeTenantRekey(f *testing.F) {
	seed, err := EncodeTenantRekey(store.TenantRekey{Tenant: "acme", ID: "a1", State: store.TenantRekeyRewrapping,
		Version: 2, Rate: 3, Done: 1, Total: 2, Worker: "n1", StartedAt: time.Unix(1700000000, 5).UTC()})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"id":"x","state":"done","version":3}`))
	f.Add([]byte(`{"version":-1`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeTenantRekey("acme", body, 7)
		if err != nil {
			return
		}
		again, err := EncodeTenantRekey(r)
		if err != nil {
			return // a body no node writes: refused on the way back
		}
		r2, err := DecodeTenantRekey("acme", again, 7)
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		r.LeaseUntil, r.StartedAt, r.UpdatedAt, r.FinishedAt = r.LeaseUntil.UTC(), r.StartedAt.UTC(), r.UpdatedAt.UTC(), r.FinishedAt.UTC()
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed the state:\n%+v\n%+v", r, r2)
		}
	})
}
