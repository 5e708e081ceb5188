package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/jose"
)

func TestFixtureIsRealistic(t *testing.T) {
	f, err := newFixture(jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.payload); n < 250 || n > 400 {
		t.Errorf("claims are %d bytes, want about 300: %s", n, f.payload)
	}
}

func TestVerifyAndSign(t *testing.T) {
	cfg := Config{Algs: []jose.Alg{jose.HS256, jose.EdDSA}, Duration: 20 * time.Millisecond, Goroutines: 2}
	for name, fn := range map[string]func(context.Context, Config) ([]Result, error){"verify": Verify, "sign": Sign} {
		t.Run(name, func(t *testing.T) {
			rs, err := fn(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 2 || rs[0].Alg != jose.HS256 || rs[1].Alg != jose.EdDSA {
				t.Fatalf("results %+v", rs)
			}
			for _, r := range rs {
				if r.Ops == 0 || r.PerSecond() <= 0 || r.NsPerOp() <= 0 || r.Goroutines != 2 {
					t.Errorf("%v: %+v", r.Alg, r)
				}
			}
			var buf bytes.Buffer
			if err := WriteTable(&buf, name, cfg, rs); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "EdDSA") {
				t.Errorf("table:\n%s", buf.String())
			}
		})
	}
}

func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Verify(ctx, Config{Algs: []jose.Alg{jose.HS256}, Duration: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("err %v", err)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, cfg := range []Config{{Duration: 0}, {Duration: time.Second, Goroutines: -1}} {
		if _, err := Verify(context.Background(), cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}
