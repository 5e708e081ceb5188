package cli

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestServeSigningAlg(t *testing.T) {
	h := newHarness(t)
	data := h.path("data")
	h.env = []string{"KEYGATE_TOKEN_SERVICE_SIGNING_ALG=EdDSA", "KEYGATE_TOKEN_SERVICE_KEY_ROTATION=0s",
		"KEYGATE_TOKEN_SERVICE_KEY_PREPUBLISH=30m", "KEYGATE_TOKEN_SERVICE_ACCESS_TOKEN_TTL=5m"}
	s := h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", data)
	stopped := false
	defer func() {
		if !stopped {
			s.stop()
		}
	}()
	out := s.stdout.String()
	idm, secm := clientIDLine.FindStringSubmatch(out), clientSecretLine.FindStringSubmatch(out)
	if idm == nil || secm == nil {
		t.Fatalf("no demo client on stdout:\n%s", out)
	}
	base := "http://" + s.addr
	code, body := post(t, base+"/oauth2/token", "grant_type=client_credentials", basic(idm[1], secm[1]))
	if code != http.StatusOK {
		t.Fatalf("token: %d %s", code, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.Unmarshal([]byte(body), &tr); err != nil || tr.AccessToken == "" {
		t.Fatalf("token response %s: %v", body, err)
	}
	if tr.ExpiresIn != 300 {
		t.Errorf("expires_in = %d, want 300 (access_token_ttl 5m)", tr.ExpiresIn)
	}
	hdr, err := base64.RawURLEncoding.DecodeString(strings.SplitN(tr.AccessToken, ".", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	var jh struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(hdr, &jh); err != nil || jh.Alg != "EdDSA" {
		t.Fatalf("token header %s: alg %q, want EdDSA (%v)", hdr, jh.Alg, err)
	}
	if resp := get(t, base+"/auth", tr.AccessToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("/auth with the EdDSA token: %d %v", resp.StatusCode, resp.Header)
	}
	stopped = true
	if code := s.stop(); code != ExitOK {
		t.Fatalf("serve exit %d:\n%s", code, s.stderr)
	}

	// Back to the default algorithm on the same store: the stored EdDSA key
	// keeps signing until it is rotated out, and /auth still accepts it.
	h.env = nil
	again := h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", data)
	defer again.stop()
	code, body = post(t, "http://"+again.addr+"/oauth2/token", "grant_type=client_credentials", basic(idm[1], secm[1]))
	if code != http.StatusOK {
		t.Fatalf("token after restart: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &tr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mustB64(t, strings.SplitN(tr.AccessToken, ".", 2)[0])), `"EdDSA"`) {
		t.Errorf("token after restart is not signed by the stored EdDSA key: %s", mustB64(t, strings.SplitN(tr.AccessToken, ".", 2)[0]))
	}
	if resp := get(t, "http://"+again.addr+"/auth", tr.AccessToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("/auth after restart with the default signing_alg: %d %v", resp.StatusCode, resp.Header)
	}
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestServeKeyPolicyEnvErrors: a key policy the environment gives that
// cannot work is refused before anything starts, naming the field.
func TestServeKeyPolicyEnvErrors(t *testing.T) {
	h := newHarness(t)
	for name, env := range map[string][]string{
		"HS256":             {"KEYGATE_TOKEN_SERVICE_SIGNING_ALG=HS256"},
		"unknown alg":       {"KEYGATE_TOKEN_SERVICE_SIGNING_ALG=ES257"},
		"lower case":        {"KEYGATE_TOKEN_SERVICE_SIGNING_ALG=es256"},
		"negative rotation": {"KEYGATE_TOKEN_SERVICE_KEY_ROTATION=-1h"},
		"negative ttl":      {"KEYGATE_TOKEN_SERVICE_ACCESS_TOKEN_TTL=-5m"},
		"rotation <= pre":   {"KEYGATE_TOKEN_SERVICE_KEY_ROTATION=1h", "KEYGATE_TOKEN_SERVICE_KEY_PREPUBLISH=2h"},
	} {
		t.Run(name, func(t *testing.T) {
			h.env = env
			r := h.run("serve", "--dev", "--listen", "127.0.0.1:0", "--data-dir", h.path("d"))
			if r.code != ExitFail || !strings.Contains(r.stderr, "token_service.") {
				t.Errorf("exit %d, want %d naming the field: %s", r.code, ExitFail, r.stderr)
			}
		})
	}
}

// TestServeTokenServiceFromConfig: the token service's settings come from
// the configuration file's token_service section, and a variable given
// wins over the file.
func TestServeTokenServiceFromConfig(t *testing.T) {
	h := newHarness(t)
	cfg := h.write("keygate.yaml", []byte(`
token_service:
  issuer: https://auth.example.test
  audience: orders-api
  signing_alg: EdDSA
  access_token_ttl: 5m
  key_rotation: 0s
  token_rate_limit: 0.5
`))
	h.env = []string{"KEYGATE_TOKEN_SERVICE_ACCESS_TOKEN_TTL=7m"}
	s := h.serve("--listen", "127.0.0.1:0", "--dev", "--data-dir", h.path("data"), "--config", cfg)
	defer s.stop()
	out := s.stdout.String()
	idm, secm := clientIDLine.FindStringSubmatch(out), clientSecretLine.FindStringSubmatch(out)
	if idm == nil || secm == nil {
		t.Fatalf("no demo client on stdout:\n%s", out)
	}
	code, body := post(t, "http://"+s.addr+"/oauth2/token", "grant_type=client_credentials", basic(idm[1], secm[1]))
	if code != http.StatusOK {
		t.Fatalf("token: %d %s", code, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.Unmarshal([]byte(body), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.ExpiresIn != 420 {
		t.Errorf("expires_in = %d, want 420: KEYGATE_TOKEN_SERVICE_ACCESS_TOKEN_TTL=7m wins over the file's 5m", tr.ExpiresIn)
	}
	parts := strings.Split(tr.AccessToken, ".")
	if hdr := string(mustB64(t, parts[0])); !strings.Contains(hdr, `"alg":"EdDSA"`) {
		t.Errorf("header %s: want the file's EdDSA", hdr)
	}
	var claims struct {
		Iss string   `json:"iss"`
		Aud []string `json:"aud"`
	}
	if err := json.Unmarshal(mustB64(t, parts[1]), &claims); err != nil || claims.Iss != "https://auth.example.test" ||
		len(claims.Aud) != 1 || claims.Aud[0] != "orders-api" {
		t.Errorf("claims %s: want the file's issuer and audience (%v)", mustB64(t, parts[1]), err)
	}
	if resp := get(t, "http://"+s.addr+"/auth", tr.AccessToken); resp.StatusCode != http.StatusOK {
		t.Errorf("/auth with the configured issuer's token: %d %v", resp.StatusCode, resp.Header)
	}
	// token_rate_limit 0.5: a burst of 1, spent above.
	if code, body := post(t, "http://"+s.addr+"/oauth2/token", "grant_type=client_credentials", basic(idm[1], secm[1])); code != http.StatusTooManyRequests {
		t.Errorf("second token within 2 s with token_rate_limit 0.5: %d %s, want 429", code, body)
	}
}
