package issuer

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/audittest"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
)

// TestIssueAuditAllocations pins what the audit log adds to the
// allocations of a client_credentials request: the request id and its
// X-Request-Id header. The kid and jti the record names are the ones
// accessToken made, not decoded back out of the token (which took four
// more).
func TestIssueAuditAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are checked without -race")
	}
	svc, secret := clientCredentialsService(t)
	log, _ := audittest.NewLog(t, audit.NewWriterSink("discard", io.Discard))
	a, err := httpaudit.New(httpaudit.Config{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	plain := svc.Handler()
	audited := a.Handler("oauth2.token", httperr.Writer{}, plain)
	body := url.Values{"grant_type": {"client_credentials"}, "client_id": {"svc"}, "client_secret": {secret}}.Encode()
	allocs := func(h http.Handler) float64 {
		req := httptest.NewRequest(http.MethodPost, "/oauth2/token", nil)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		issue := func() {
			req.Body = io.NopCloser(strings.NewReader(body))
			req.Form, req.PostForm = nil, nil
			w.Body.Reset()
			clear(w.Header())
			w.Code = 0
			h.ServeHTTP(w, req)
		}
		issue()
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		return testing.AllocsPerRun(200, issue)
	}
	p, q := allocs(plain), allocs(audited)
	t.Logf("client_credentials: %v allocations, audited %v", p, q)
	if q-p > 2 {
		t.Errorf("the audit log adds %v allocations to a client_credentials request, want at most 2", q-p)
	}
}
