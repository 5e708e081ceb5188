package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/bench/loadgen"
	"github.com/keygate/keygate/internal/keyfile"
	"github.com/keygate/keygate/jose"
)

func TestHandlerModes(t *testing.T) {
	for _, mode := range Modes {
		if mode == ModeSign || mode == ModeAESGCM {
			continue // TestSignMode, TestAESGCMMode
		}
		t.Run(mode, func(t *testing.T) {
			h, err := Handler(mode)
			if err != nil {
				t.Fatal(err)
			}
			req := benchRequest(http.MethodGet, "/auth", nil)
			req.Header.Set("Authorization", "Bearer whatever")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
				t.Errorf("status %d, body %q", rec.Code, rec.Body)
			}
		})
	}
	if _, err := Handler("nope"); err == nil || !strings.Contains(err.Error(), "noop, es256, es256-table, es256-sign") {
		t.Errorf("unknown mode: %v", err)
	}
}

// TestSignMode: the signing reference answers a token response whose
// signature is fresh per request and verifies.
func TestSignMode(t *testing.T) {
	raw, err := NewRawES256()
	if err != nil {
		t.Fatal(err)
	}
	h, err := Handler(ModeSign)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 3 {
		req := benchRequest(http.MethodPost, "/oauth2/token", strings.NewReader("grant_type=client_credentials"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var tr struct {
			AccessToken string `json:"access_token"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &tr) != nil || strings.Count(tr.AccessToken, ".") != 2 {
			t.Fatalf("status %d, body %q", rec.Code, rec.Body)
		}
		dot := strings.LastIndexByte(tr.AccessToken, '.')
		sig, err := base64.RawURLEncoding.DecodeString(tr.AccessToken[dot+1:])
		if err != nil || len(sig) < 64 {
			t.Fatalf("signature %q: %v", tr.AccessToken[dot+1:], err)
		}
		seen[string(sig)] = true
	}
	if len(seen) != 3 {
		t.Errorf("%d distinct signatures in 3 requests; each must be signed afresh", len(seen))
	}
	if sig, err := raw.Sign(); err != nil || !ecdsa.VerifyASN1(raw.pub, sha256sum(raw.msg), sig) {
		t.Errorf("RawES256.Sign: %v", err)
	}
}

// TestTableMode: the table reference verifies with the key's table, and
// a wrong signature fails there as with crypto/ecdsa.
func TestTableMode(t *testing.T) {
	for _, mode := range []string{ModeES256Table, ModeGRPCES256Table} {
		raw, err := newRawES256Mode(mode)
		if err != nil {
			t.Fatal(err)
		}
		if raw.table == nil || !raw.table.HasTable() || !raw.Verify() {
			t.Fatalf("%s: table %v, verify %v", mode, raw.table != nil, raw.Verify())
		}
		raw.p1363[40] ^= 1
		if raw.Verify() {
			t.Errorf("%s: a changed signature verifies", mode)
		}
	}
	if raw, err := newRawES256Mode(ModeES256); err != nil || raw.table != nil {
		t.Errorf("%s: table %v, %v", ModeES256, raw != nil && raw.table != nil, err)
	}
}

func sha256sum(b []byte) []byte { d := sha256.Sum256(b); return d[:] }

func TestServe(t *testing.T) {
	h, err := Handler(ModeES256)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h) }()
	client := &http.Client{Timeout: 5 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/auth", nil)
	req.Header.Set(loadgen.MarkerHeader, loadgen.Marker())
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.ContentLength != 0 {
		t.Errorf("status %d, length %d, body %q", resp.StatusCode, resp.ContentLength, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestRawES256(t *testing.T) {
	r, err := NewRawES256()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Verify() {
		t.Fatal("signature does not verify")
	}
	r.msg = append([]byte(nil), r.msg...)
	r.msg[0] ^= 1
	if r.Verify() {
		t.Error("a changed signing input verifies")
	}
	rs, err := VerifyRaw(context.Background(), Config{Algs: []jose.Alg{jose.ES256}, Duration: 20 * time.Millisecond, Goroutines: 1})
	if err != nil || len(rs) != 1 || rs[0].Ops == 0 {
		t.Fatalf("VerifyRaw: %+v, %v", rs, err)
	}
	if _, err := VerifyRaw(context.Background(), Config{Algs: []jose.Alg{jose.HS256}, Duration: time.Millisecond}); err == nil {
		t.Error("VerifyRaw accepted HS256")
	}
}

func TestWriteTokens(t *testing.T) {
	priv, err := keyfile.Generate(jose.ES256, 0)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.ES256, "k1", priv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jose.NewVerifier(jose.NewKeySet(signer.Key()), []jose.Alg{jose.ES256},
		jose.Expected{Issuer: DefaultIssuer, Audience: []string{DefaultAudience}, Require: []string{"exp", "jti"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = tokenBatch + 100 // more than one batch, the last one partial
	var buf bytes.Buffer
	if err := WriteTokens(context.Background(), &buf, TokensConfig{Signer: signer, Claims: RealisticClaims(), N: n, Workers: 3}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	jtis := map[string]bool{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		tok := sc.Text()
		if seen[tok] {
			t.Fatalf("token written twice")
		}
		seen[tok] = true
		if len(seen) > 20 { // verifying every one is slow under -race
			continue
		}
		res, err := v.Verify(tok)
		if err != nil {
			t.Fatalf("token %d does not verify: %v", len(seen), err)
		}
		jtis[res.Claims.ID] = true
	}
	if len(seen) != n || len(jtis) != 20 {
		t.Errorf("%d distinct tokens, %d distinct jti among the first 20; want %d", len(seen), len(jtis), n)
	}

	bad := RealisticClaims()
	bad.TTL = 0
	if err := WriteTokens(context.Background(), io.Discard, TokensConfig{Signer: signer, Claims: bad, N: 1}); err == nil {
		t.Error("a zero TTL was accepted")
	}
	if err := WriteTokens(context.Background(), io.Discard, TokensConfig{Claims: RealisticClaims(), N: 1}); err == nil {
		t.Error("no signer was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WriteTokens(ctx, io.Discard, TokensConfig{Signer: signer, Claims: RealisticClaims(), N: 1 << 20}); err == nil {
		t.Error("a cancelled context was ignored")
	}
}

// TestAESGCMMode: the encryption reference reads the body and answers a
// fresh 64-byte AES-GCM ciphertext per request.
func TestAESGCMMode(t *testing.T) {
	h, err := Handler(ModeAESGCM)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 3 {
		req := benchRequest(http.MethodPost, "/v1/transit/encrypt/k", strings.NewReader(`{"plaintext":"aGk="}`))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var v struct {
			Data struct {
				Ciphertext string `json:"ciphertext"`
			} `json:"data"`
		}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(v.Data.Ciphertext, "vault:v1:"))
		if err != nil || len(raw) != 12+64+16 || seen[v.Data.Ciphertext] {
			t.Errorf("ciphertext %q: %v", v.Data.Ciphertext, err)
		}
		seen[v.Data.Ciphertext] = true
	}
}
