package verifykeys

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// discoveryIDP serves a discovery document made by doc from the server's own
// URL, under prefix, and a JWKS at /jwks.
func discoveryIDP(t *testing.T, prefix string, doc func(base string) any) *idp {
	var base string
	p := newIDP(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case prefix + wellKnown:
			switch d := doc(base).(type) {
			case http.HandlerFunc:
				d(w, r)
			case string:
				_, _ = w.Write([]byte(d))
			default:
				_ = json.NewEncoder(w).Encode(d)
			}
		case "/jwks":
			_, _ = w.Write(jwks("a"))
		default:
			http.NotFound(w, r)
		}
	})
	base = p.srv.URL
	return p
}

func docOf(issuer, jwksURI string) map[string]any {
	return map[string]any{"issuer": issuer, "jwks_uri": jwksURI, "response_types_supported": []string{"code"}}
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		prefix string                   // where the document lives
		issuer func(base string) string // as configured
		doc    func(base string) any
		want   func(base string) string // the jwks_uri, or "" for an error
		result string
		is     error
	}{
		{"good", "", func(b string) string { return b },
			func(b string) any { return docOf(b, b+"/jwks") },
			func(b string) string { return b + "/jwks" }, "", nil},
		{"issuer with path", "/realms/x", func(b string) string { return b + "/realms/x" },
			func(b string) any { return docOf(b+"/realms/x", b+"/jwks") },
			func(b string) string { return b + "/jwks" }, "", nil},
		{"issuer with trailing slash", "", func(b string) string { return b + "/" },
			func(b string) any { return docOf(b+"/", b+"/jwks") },
			func(b string) string { return b + "/jwks" }, "", nil},
		{"https jwks_uri elsewhere", "", func(b string) string { return b },
			func(b string) any { return docOf(b, "https://keys.example.com/jwks") },
			func(string) string { return "https://keys.example.com/jwks" }, "", nil},
		{"issuer mismatch", "", func(b string) string { return b },
			func(b string) any { return docOf("https://evil.example.com", b+"/jwks") },
			nil, ResultBadDiscovery, ErrIssuerMismatch},
		{"issuer differs by a trailing slash", "", func(b string) string { return b },
			func(b string) any { return docOf(b+"/", b+"/jwks") },
			nil, ResultBadDiscovery, ErrIssuerMismatch},
		{"issuer differs in case", "", func(b string) string { return b },
			func(b string) any { return docOf(strings.ToUpper(b), b+"/jwks") },
			nil, ResultBadDiscovery, ErrIssuerMismatch},
		{"no issuer", "", func(b string) string { return b },
			func(b string) any { return map[string]any{"jwks_uri": b + "/jwks"} },
			nil, ResultBadDiscovery, nil},
		{"http jwks_uri elsewhere", "", func(b string) string { return b },
			func(b string) any { return docOf(b, "http://keys.example.com/jwks") },
			nil, ResultBadDiscovery, ErrInsecureURL},
		{"ftp jwks_uri", "", func(b string) string { return b },
			func(b string) any { return docOf(b, "ftp://127.0.0.1/jwks") },
			nil, ResultBadDiscovery, nil},
		{"no jwks_uri", "", func(b string) string { return b },
			func(b string) any { return map[string]any{"issuer": b} },
			nil, ResultBadDiscovery, nil},
		{"jwks_uri not a string", "", func(b string) string { return b },
			func(b string) any { return map[string]any{"issuer": b, "jwks_uri": 7} },
			nil, ResultBadJSON, nil},
		{"not JSON", "", func(b string) string { return b },
			func(string) any { return "<html>" },
			nil, ResultBadJSON, nil},
		{"too large", "", func(b string) string { return b },
			func(b string) any {
				d := docOf(b, b+"/jwks")
				d["padding"] = strings.Repeat("x", 2<<20)
				return d
			},
			nil, ResultTooLarge, ErrTooLarge},
		{"404", "", func(b string) string { return b },
			func(string) any { return http.HandlerFunc(http.NotFound) },
			nil, ResultHTTPError, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := discoveryIDP(t, tt.prefix, tt.doc)
			base := p.srv.URL
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err := Discover(ctx, p.srv.Client(), tt.issuer(base))
			if tt.want != nil {
				if err != nil || got != tt.want(base) {
					t.Fatalf("Discover: %q, %v", got, err)
				}
				if h := p.header(); h.Get("Accept") != "application/json" || h.Get("User-Agent") != "keygate" {
					t.Errorf("request header %v", h)
				}
				return
			}
			var fe *FetchError
			if !errors.As(err, &fe) || fe.Result != tt.result || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("Discover: %q, %v; want a %s error", got, err, tt.result)
			}
		})
	}
}

func TestDiscoverRefusesInsecureIssuer(t *testing.T) {
	t.Parallel()
	for _, issuer := range []string{"http://idp.example.com", "ftp://idp.example.com", "idp.example.com",
		"https://idp.example.com?x=1", "https://idp.example.com#f", "https://u:p@idp.example.com"} {
		// Nothing listens there: a request would fail differently.
		if _, err := Discover(context.Background(), nil, issuer); err == nil || strings.Contains(err.Error(), "GET") {
			t.Errorf("%s: %v", issuer, err)
		}
		if _, err := NewDiscovered(issuer, RemoteConfig{}); err == nil {
			t.Errorf("NewDiscovered(%s) succeeded", issuer)
		}
	}
	if _, err := NewDiscovered("https://idp.example.com", RemoteConfig{URL: "https://idp.example.com/jwks"}); err == nil {
		t.Error("NewDiscovered with a URL succeeded")
	}
}

func TestNewDiscovered(t *testing.T) {
	t.Parallel()
	var failing atomic.Int64
	failing.Store(2)
	p := discoveryIDP(t, "", func(b string) any {
		if failing.Add(-1) >= 0 {
			return http.HandlerFunc(status(503))
		}
		return docOf(b, b+"/jwks")
	})
	var rec recorder
	r, err := NewDiscovered(p.srv.URL, RemoteConfig{MinRefresh: 20 * time.Millisecond, OnFetch: rec.on, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if r.URL() != "" {
		t.Errorf("URL before discovery: %q", r.URL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if kids(r.Current()) != "a" || r.URL() != p.srv.URL+"/jwks" {
		t.Errorf("keys %q from %q", kids(r.Current()), r.URL())
	}
	if got := rec.results(); got != "discovery:http_error,discovery:http_error,ok" {
		t.Errorf("events %q", got)
	}
	if ev := rec.events()[0]; ev.URL != p.srv.URL+wellKnown {
		t.Errorf("discovery event URL %q", ev.URL)
	}
}

func TestNewDiscoveredGivesUp(t *testing.T) {
	t.Parallel()
	p := discoveryIDP(t, "", func(b string) any { return docOf("https://evil.example.com", b+"/jwks") })
	r, err := NewDiscovered(p.srv.URL, RemoteConfig{MinRefresh: 20 * time.Millisecond, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = r.Start(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrIssuerMismatch) {
		t.Errorf("Start: %v", err)
	}
	if st := r.Status(); st.Ready() || !errors.Is(st.LastError, ErrIssuerMismatch) {
		t.Errorf("status %+v", st)
	}
	if n := p.hits.Load(); n < 2 {
		t.Errorf("discovery tried %d times, want retries", n)
	}
}

// TestDiscoveredFollowsMovedJWKS: when the provider moves its keys to a new
// jwks_uri and the old one stops answering, a discovered source keeps
// serving its last good keys, asks the discovery document again after
// rediscoverAfter failed fetches, and follows it to the new keys.
func TestDiscoveredFollowsMovedJWKS(t *testing.T) {
	t.Parallel()
	var moved atomic.Bool
	var base string
	p := newIDP(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == wellKnown && moved.Load():
			_ = json.NewEncoder(w).Encode(docOf(base, base+"/keys/v2"))
		case r.URL.Path == wellKnown:
			_ = json.NewEncoder(w).Encode(docOf(base, base+"/jwks"))
		case r.URL.Path == "/jwks" && !moved.Load():
			_, _ = w.Write(jwks("a"))
		case r.URL.Path == "/keys/v2" && moved.Load():
			_, _ = w.Write(jwks("b"))
		default:
			http.NotFound(w, r)
		}
	})
	base = p.srv.URL
	var rec recorder
	r, err := NewDiscovered(base, RemoteConfig{MinRefresh: 20 * time.Millisecond, DefaultRefresh: 50 * time.Millisecond,
		OnFetch: rec.on, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if kids(r.Current()) != "a" {
		t.Fatalf("keys %q, want a", kids(r.Current()))
	}
	moved.Store(true)
	eventually(t, 5*time.Second, "the moved keys are not served", func() bool { return kids(r.Current()) == "b" })
	if r.URL() != base+"/keys/v2" {
		t.Errorf("URL %q, want the new jwks_uri", r.URL())
	}
	// The old URL failed exactly rediscoverAfter times, then the new one
	// answered.
	got := rec.results()
	failed := strings.Repeat("http_error,", rediscoverAfter)
	if i := strings.Index(got, "http_error"); i < 0 || !strings.HasPrefix(got[i:], failed+"ok") || strings.Contains(got[i+len(failed):], "error") {
		t.Errorf("events %q: want %d failed fetches, then only successes", got, rediscoverAfter)
	}
}
