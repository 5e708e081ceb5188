package server

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/testnet"
)

// trustingYAML is a configuration that trusts one issuer's keys, from a
// JWKS file it writes in dir, with its data directory in dir too.
func trustingYAML(t *testing.T, dir string) string {
	t.Helper()
	keys := filepath.Join(dir, "keys.jwks.json")
	if err := os.WriteFile(keys, oneKeyJWKS(t), 0o600); err != nil {
		t.Fatal(err)
	}
	return "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\ndata_dir: " + filepath.Join(dir, "data") + "\n" +
		"issuers:\n  - {issuer: \"https://idp.test/\", key_files: [" + keys + "], algorithms: [ES256]}\n"
}

// loadYAML writes yaml to dir's keygate.yaml and loads it.
func loadYAML(t *testing.T, dir, yaml string, env ...string) (*config.Config, string) {
	t.Helper()
	path := filepath.Join(dir, "keygate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, env)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, path
}

func noEnv(string) (string, bool) { return "", false }

// TestGatewayOnly: issuers alone run the gateway alone; dev mode, any
// token_service setting but the admin token file, a root key in the
// environment or a keyring in the data directory ask for a token service.
func TestGatewayOnly(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string // added to trustingYAML's
		env   []string
		dev   bool
		ring  bool
		alone bool
	}{
		{"issuers and nothing else", "", nil, false, false, true},
		{"the admin token file only", "token_service: {admin_token_file: /x}\n", nil, false, false, true},
		{"dev mode", "", nil, true, false, false},
		{"a token_service setting in the file", "token_service: {signing_alg: EdDSA}\n", nil, false, false, false},
		{"a token_service setting in the environment", "", []string{"KEYGATE_DATABASE_URL=postgres://db/x"}, false, false, false},
		{"a root key in the environment", "", []string{node.RootKeyEnv + "=x"}, false, false, false},
		{"a keyring in the data directory", "", nil, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg, _ := loadYAML(t, dir, trustingYAML(t, dir)+tc.yaml, tc.env...)
			if tc.ring {
				os.MkdirAll(cfg.DataDir, 0o700)
				os.WriteFile(filepath.Join(cfg.DataDir, node.KeyringFile), []byte("{}"), 0o600)
			}
			o := Options{Config: Config{Gateway: cfg}, Dev: tc.dev, LookupEnv: func(name string) (string, bool) {
				for _, kv := range tc.env {
					if k, v, _ := strings.Cut(kv, "="); k == name {
						return v, true
					}
				}
				return "", false
			}}
			if got := o.gatewayOnly(cfg.TokenService); got != tc.alone {
				t.Errorf("gateway only %v, want %v", got, tc.alone)
			}
		})
	}
	o := Options{Config: Config{Gateway: &config.Config{}}, LookupEnv: noEnv}
	if o.gatewayOnly(config.TokenService{}) {
		t.Error("no issuers: gateway only, with nothing to trust")
	}
}

// TestStartGatewayOnly: a gateway-only start writes nothing, not even for
// the command line's audience (an override, which alone asks for no token
// service); it serves until its context ends and frees its ports.
func TestStartGatewayOnly(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := loadYAML(t, dir, trustingYAML(t, dir))
	s, err := Start(context.Background(), Options{Config: Config{Gateway: cfg,
		Overrides: func(c *config.Config) { c.TokenService.Audience = "api" }}, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if s.Node() != nil {
		t.Error("a token service was opened")
	}
	if cfg.TokenService.Audience != "api" {
		t.Error("the overrides were not applied")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	resp, err := http.Get("http://" + s.Addr().String() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", err, resp)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) {
		t.Errorf("a gateway-only node made its data directory (%v)", err)
	}
	ln, err := net.Listen("tcp", s.Addr().String())
	if err != nil {
		t.Fatalf("the traffic port is still held: %v", err)
	}
	ln.Close()
}

// TestStartTokenService: a node with a token service takes the traffic
// listener's URL as its issuer and keygate-demo as its audience unless
// configured, and its issuer names the port actually bound.
func TestStartTokenService(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := loadYAML(t, dir, "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\ndata_dir: "+filepath.Join(dir, "data")+"\n")
	s, err := Start(context.Background(), Options{Config: Config{Gateway: cfg}, Dev: true, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := s.Node()
	if n == nil {
		t.Fatal("no token service")
	}
	if want := "http://" + s.Addr().String(); n.Issuer() != want || n.Audience() != DefaultAudience {
		t.Errorf("issuer %q, audience %q; want %q, %q", n.Issuer(), n.Audience(), want, DefaultAudience)
	}
}

// TestStartRefusals: an admin listener exposed over plain HTTP is refused
// before the node is opened, a sealed node without an admin listener to
// unseal it is refused, and each refusal closes what was opened.
func TestStartRefusals(t *testing.T) {
	t.Run("admin listener exposed", func(t *testing.T) {
		dir := t.TempDir()
		cfg, _ := loadYAML(t, dir, "listen: 127.0.0.1:0\nadmin_listen: 0.0.0.0:0\ndata_dir: "+filepath.Join(dir, "data")+"\n")
		_, err := Start(context.Background(), Options{Config: Config{Gateway: cfg}, LookupEnv: noEnv})
		for _, want := range adminRefusal {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v, want %q", err, want)
			}
		}
		if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) {
			t.Errorf("the data directory was made before the refusal (%v)", err)
		}
	})
	t.Run("sealed without an admin listener", func(t *testing.T) {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := rootkey.InitPassphrase(filepath.Join(data, node.KeyringFile), []byte("a long unseal passphrase"), rand.Reader); err != nil {
			t.Fatal(err)
		}
		traffic := testnet.ClosedAddr(t)
		cfg, _ := loadYAML(t, dir, "listen: "+traffic+"\nadmin_listen: \"off\"\ndata_dir: "+data+"\n")
		_, err := Start(context.Background(), Options{Config: Config{Gateway: cfg}, LookupEnv: noEnv})
		if err == nil || !strings.Contains(err.Error(), "could never be unsealed") {
			t.Fatalf("%v, want the sealed node refused", err)
		}
		ln, err := net.Listen("tcp", traffic)
		if err != nil {
			t.Fatalf("the refused start still holds its traffic port: %v", err)
		}
		ln.Close()
	})
}

// TestStartOverridesOnReload: the command line's settings win over the
// file at the start and on every reload.
func TestStartOverridesOnReload(t *testing.T) {
	dir := t.TempDir()
	base := trustingYAML(t, dir)
	cfg, path := loadYAML(t, dir, base+"forward_auth: {proxy: caddy}\n")
	s, err := Start(context.Background(), Options{Config: Config{Gateway: cfg, ConfigPath: path,
		Overrides: func(c *config.Config) { c.ForwardAuth.Proxy = "nginx" }}, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.rt.Load().cfg.ForwardAuth.Proxy; got != "nginx" {
		t.Errorf("at the start: proxy %q, want the override's nginx", got)
	}
	if err := os.WriteFile(path, []byte(base+"forward_auth: {proxy: traefik}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.rt.Load().cfg.ForwardAuth.Proxy; got != "nginx" {
		t.Errorf("after a reload: proxy %q, want the override's nginx", got)
	}
}

// adminRefusal is what a refused admin listener's error must say: why, and
// each way out.
var adminRefusal = []string{"refusing to serve the admin listener", "unseal passphrases", "admin_tls.cert_file", "--insecure-admin"}

// fakeListener is a listener bound, it says, to addr.
type fakeListener struct {
	net.Listener
	addr net.Addr
}

func (l fakeListener) Addr() net.Addr { return l.addr }

// TestCheckAdminListener: the bound address decides. Off loopback (a
// private address, every interface, IPv6's unspecified address) plain
// HTTP is refused, saying why; loopback, IPv4-mapped included, is not.
// --insecure-admin lets it serve with a warning; TLS too, with a warning
// unless client certificates are required.
func TestCheckAdminListener(t *testing.T) {
	cfg := &config.Config{AdminListen: "admin.example:9090"}
	for _, tt := range []struct {
		ip   string
		bad  bool
		want string // in the refusal
	}{
		{"127.0.0.1", false, ""}, {"::1", false, ""}, {"::ffff:127.0.0.1", false, ""},
		{"10.0.0.7", true, "admin.example:9090 (10.0.0.7) over plain HTTP"},
		{"0.0.0.0", true, "(0.0.0.0), every interface,"}, {"::", true, "(::), every interface,"},
	} {
		ln := fakeListener{addr: &net.TCPAddr{IP: net.ParseIP(tt.ip), Port: 9090}}
		var logs testnet.SyncBuffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		err := checkAdminListener(log, ln, cfg, false)
		if (err != nil) != tt.bad {
			t.Fatalf("%s: %v", tt.ip, err)
		}
		if err != nil {
			for _, want := range append([]string{tt.want}, adminRefusal...) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: the refusal lacks %q: %v", tt.ip, want, err)
				}
			}
		}
		if err := checkAdminListener(log, ln, cfg, true); err != nil {
			t.Errorf("%s with --insecure-admin: %v", tt.ip, err)
		}
		if got := strings.Contains(logs.String(), "serves plain HTTP off loopback"); got != tt.bad {
			t.Errorf("%s with --insecure-admin: warned %v, want %v:\n%s", tt.ip, got, tt.bad, logs.String())
		}
	}
	tlsCfg := *cfg
	tlsCfg.AdminTLS.CertFile, tlsCfg.AdminTLS.KeyFile = "a.crt", "a.key"
	mtlsCfg := tlsCfg
	mtlsCfg.AdminTLS.ClientCAFile = "ca.pem"
	for _, tt := range []struct {
		cfg  *config.Config
		warn bool
	}{{&tlsCfg, true}, {&mtlsCfg, false}} {
		var logs testnet.SyncBuffer
		if err := checkAdminListener(slog.New(slog.NewTextHandler(&logs, nil)), fakeListener{addr: &net.TCPAddr{IP: net.IPv4zero}}, tt.cfg, false); err != nil {
			t.Errorf("with TLS: %v", err)
		}
		if got := strings.Contains(logs.String(), "accepts any TLS client off loopback"); got != tt.warn {
			t.Errorf("client CA %q: warned %v, want %v", tt.cfg.AdminTLS.ClientCAFile, got, tt.warn)
		}
	}
}
