package cli

import (
	"strings"
	"testing"
)

func TestServeRedisURLRefused(t *testing.T) {
	h := newHarness(t)
	r := h.run("serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--data-dir", h.path("data"),
		"--redis-url", "http://127.0.0.1:6379")
	if r.code != ExitFail || !strings.Contains(r.stderr, "redis URL") {
		t.Errorf("serve with a non-Redis URL: %d %s", r.code, r.stderr)
	}
}
