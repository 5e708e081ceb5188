package cli

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestServeEmptyEnvKeepsProtections: with the admin listener's client CA,
// the metrics token file and the admin token file in the configuration
// file, the empty variables and flags a template writes for values left
// out (KEYGATE_ADMIN_TLS_CLIENT_CA_FILE=, --proxy=, ...) clear none of
// them: the admin listener still refuses a client without a
// certificate, /metrics still wants its token, the admin API still wants
// the file's token. The start log names the variables that configure the
// node and those ignored, and never a value.
func TestServeEmptyEnvKeepsProtections(t *testing.T) {
	h := newHarness(t)
	f := newTLSFiles(t, h.dir)
	adminToken := strings.Repeat("a", 40)
	metricsToken := strings.Repeat("m", 40)
	adminTokenFile := h.write("admin.token", []byte(adminToken+"\n"))
	metricsTokenFile := h.write("metrics.token", []byte(metricsToken+"\n"))
	cfg := h.write("keygate.yaml", []byte("admin_tls: {cert_file: "+f.adminCert+", key_file: "+f.adminKey+", client_ca_file: "+f.clientCAFile+"}\n"+
		"metrics_token_file: "+metricsTokenFile+"\nforward_auth: {proxy: nginx}\n"+
		"token_service: {admin_token_file: "+adminTokenFile+"}\n"))
	unrelated := "c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1iZS1sb2dnZWQ" // a variable of no field's, whose value is no one's business
	h.env = []string{"KEYGATE_CONFIG=" + cfg, "KEYGATE_LOG_LEVEL=info", "KEYGATE_ADMIN_TLS_CLIENT_CA_FILE=", "KEYGATE_METRICS_TOKEN_FILE=",
		"KEYGATE_FORWARD_AUTH_PROXY=", "KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE=", "KEYGATE_ROOT_KEY=",
		"KEYGATE_METRICS_TOKEN=" + strings.Repeat("x", 40), "KEYGATE_SOMETHING_ELSE=" + unrelated}
	s := h.serve("--listen", "127.0.0.1:0", "--data-dir", h.path("data"), "--log-format=", "--probe-listen=", "--proxy=")
	t.Cleanup(func() { s.stop() })
	h.env = nil
	admin := "https://" + logged(t, s, adminTLSLog) // client certificates required

	// Without a client certificate the admin listener's handshake fails;
	// with one, /metrics still wants the file's token.
	if resp, err := f.httpsClient(t).Get(admin + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("admin listener answered a client without a certificate: %s", resp.Status)
	}
	withCert := f.httpsClient(t, f.opCert, f.opKey)
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {strings.Repeat("x", 40), http.StatusUnauthorized}, {metricsToken, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, admin+"/metrics", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := withCert.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("/metrics with token %.4q...: %d, want %d", tc.token, resp.StatusCode, tc.want)
		}
	}
	// The admin API takes the file's token; no dev token was made.
	conn := []string{"--admin", admin, "--admin-ca", f.caFile, "--admin-cert", f.opCert, "--admin-key", f.opKey}
	h.must(append([]string{"clients", "list", "--admin-token-file", adminTokenFile}, conn...)...)
	expect(t, h.run(append([]string{"clients", "list", "--admin-token-file", filepath.Join(h.path("data"), "admin.token")}, conn...)...),
		ExitFail, "", "")

	logs := s.stderr.String()
	for _, re := range []string{
		`msg="configuration from the environment" variables=KEYGATE_CONFIG,KEYGATE_LOG_LEVEL,KEYGATE_METRICS_TOKEN\n`,
		`msg="empty environment variables ignored[^"]*" variables=KEYGATE_ADMIN_TLS_CLIENT_CA_FILE,` +
			`KEYGATE_FORWARD_AUTH_PROXY,KEYGATE_METRICS_TOKEN_FILE,KEYGATE_ROOT_KEY,KEYGATE_TOKEN_SERVICE_ADMIN_TOKEN_FILE\n`,
		`msg="flags given an empty value ignored[^"]*" flags=--log-format,--probe-listen,--proxy\n`,
		`forward_auth_proxy=nginx`,
	} {
		if !regexp.MustCompile(re).MatchString(logs) {
			t.Errorf("the start log does not match %s:\n%s", re, logs)
		}
	}
	for _, secret := range []string{strings.Repeat("x", 40), metricsToken, adminToken, unrelated} {
		if strings.Contains(logs, secret) {
			t.Errorf("a secret reached the log: %.6q...", secret)
		}
	}
}

// TestServeEmptyConfigFlag: --config given empty is refused, naming the
// flag, instead of starting a node without its file.
func TestServeEmptyConfigFlag(t *testing.T) {
	h := newHarness(t)
	h.env = []string{"KEYGATE_CONFIG=" + h.write("keygate.yaml", []byte("listen: 127.0.0.1:0\n"))}
	expect(t, h.run("serve", "--config="), ExitUsage, "", "--config is empty")
}

// TestServeEmptyConfigVariable: KEYGATE_CONFIG set empty (Compose's
// ${CONFIG:-} with CONFIG left out) is refused like --config=, naming the
// variable, instead of starting a dev node without the file.
func TestServeEmptyConfigVariable(t *testing.T) {
	for _, v := range []string{"", "  "} {
		h := newHarness(t)
		h.env = []string{"KEYGATE_CONFIG=" + v}
		expect(t, h.run("serve", "--listen", "127.0.0.1:0"), ExitUsage, "", "KEYGATE_CONFIG is empty")
	}
}
