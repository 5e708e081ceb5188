package kvapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/keygate/keygate/internal/secrets"
	"github.com/keygate/keygate/internal/secrets/kvapi"
	"github.com/keygate/keygate/internal/vaultauth/vaultauthtest"
)

// countingService counts the reads of a path's metadata.
type countingService struct {
	secrets.Service
	metadata atomic.Int64
}

func (s *countingService) Metadata(ctx context.Context, tenant, path string) (*secrets.Metadata, error) {
	s.metadata.Add(1)
	return s.Service.Metadata(ctx, tenant, path)
}

// The answer to a write or a patch carries the path's custom metadata as
// the write stored it, without reading the path's metadata again.
func TestWrittenCarriesCustomMetadata(t *testing.T) {
	svc := &countingService{Service: newService(t)}
	tokens := vaultauthtest.New(t)
	h, err := kvapi.New(kvapi.Options{Secrets: svc, Verifier: tokens.Verifier})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	e := &env{t: t, url: ts.URL, tokens: tokens}
	tok := e.token("alpha", allScopes...)

	if st, b := e.call(tok, "POST", "/v1/secret/data/plain", `{"data":{"a":1}}`); st != 200 || !strings.Contains(string(b), `"custom_metadata":null`) {
		t.Fatalf("write without custom metadata: %d %s", st, b)
	}
	if st, b := e.call(tok, "POST", "/v1/secret/metadata/app", `{"custom_metadata":{"owner":"ops"}}`); st != 204 {
		t.Fatalf("metadata: %d %s", st, b)
	}
	for _, tc := range []struct{ name, method, body, ctype string }{
		{"write", "POST", `{"data":{"a":1}}`, ""},
		{"patch", "PATCH", `{"data":{"b":2}}`, "application/merge-patch+json"},
	} {
		var hdr []string
		if tc.ctype != "" {
			hdr = []string{"Content-Type", tc.ctype}
		}
		before := svc.metadata.Load()
		st, b := e.call(tok, tc.method, "/v1/secret/data/app", tc.body, hdr...)
		var env struct {
			Data struct {
				Custom  map[string]string `json:"custom_metadata"`
				Version int               `json:"version"`
			} `json:"data"`
		}
		if st != 200 || json.Unmarshal(b, &env) != nil {
			t.Fatalf("%s: %d %s", tc.name, st, b)
		}
		if env.Data.Custom["owner"] != "ops" || len(env.Data.Custom) != 1 {
			t.Errorf("%s: custom metadata %v, want owner=ops", tc.name, env.Data.Custom)
		}
		if n := svc.metadata.Load() - before; n != 0 {
			t.Errorf("%s: the path's metadata read %d times for the answer, want none", tc.name, n)
		}
	}
}
