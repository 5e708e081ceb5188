package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/keygate/keygate/internal/bench/loadgen"
)

// loadExtras are the flags of 'keygate bench load' kept out of
// benchload.go: HTTP/2 over plaintext (h2c) and a token per request from a
// file.
type loadExtras struct {
	http2     bool
	streams   int
	tokenFile string
}

func loadExtraFlags(fs *flagSet) *loadExtras {
	x := &loadExtras{}
	fs.BoolVar(&x.http2, "http2", false, "speak HTTP/2 without TLS, with prior knowledge (h2c), instead of HTTP/1.1")
	fs.IntVar(&x.streams, "streams", 1, "with --http2: concurrent requests (streams) per connection")
	fs.StringVar(&x.tokenFile, "token-file", "", "send the tokens of `FILE` in turn, one per request, as\n"+
		"'Authorization: Bearer <token>' (one per line, as 'keygate bench tokens' writes them)")
	return x
}

// apply checks the extra flags and applies them to cfg (after its request
// is complete, body included).
func (x *loadExtras) apply(fs *flagSet, cfg *loadgen.Config) error {
	switch {
	case x.streams <= 0:
		return usageErrorf(fs.Name(), "--streams must be positive")
	case x.streams > 1 && !x.http2:
		return usageErrorf(fs.Name(), "--streams needs --http2 (HTTP/1.1 carries one request at a time)")
	}
	if x.tokenFile == "" {
		return nil
	}
	for _, h := range cfg.Request.Header {
		if strings.EqualFold(h.Name, "authorization") {
			return usageErrorf(fs.Name(), "--token-file sets the Authorization header: do not give one with -H")
		}
	}
	// A token per request is --values with the token in Authorization.
	tpl := cfg.Request
	tpl.Header = append(slices.Clone(tpl.Header), loadgen.Header{Name: "Authorization", Value: "Bearer " + valuePlaceholder})
	pool, err := valuePool(tpl, x.tokenFile)
	if err != nil {
		return fmt.Errorf("bench load: tokens: %w", err)
	}
	cfg.Pool = pool
	return nil
}

// run runs one step over the transport the flags chose.
func (x *loadExtras) run(ctx context.Context, cfg loadgen.Config) (*loadgen.Result, error) {
	if x.http2 {
		return loadgen.RunHTTP2(ctx, cfg, x.streams)
	}
	return loadgen.Run(ctx, cfg)
}
