package e2e

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/ratelimit"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
)

// auditFiles reads every record line of the audit files in dir, and their
// size in bytes.
func auditFiles(t *testing.T, dir string) (records []audit.Record, size int64) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, audit.MaxLineLen)
		for sc.Scan() {
			size += int64(len(sc.Bytes()) + 1)
			e, err := audit.ParseLine(sc.Bytes())
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if e.Type == audit.TypeRecord {
				records = append(records, e.Record)
			}
		}
		f.Close()
	}
	return records, size
}

// TestAuditUnauthenticatedFlood: a flood of transit requests with a bogus
// bearer token, as in the report (Authorization: Bearer x), no longer
// writes a record per request. The first refusals from the address are
// recorded one by one; past the address's limit the answer is 429 with
// Retry-After, and those refusals are recorded as one aggregate record per
// address, operation and reason when the node's schedule runs, counting
// every one of them. An authenticated request in the middle of the flood
// is answered and recorded as usual.
func TestAuditUnauthenticatedFlood(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	l := startLive(t, server.Config{AdminToken: auditAdminToken, Metrics: telemetry.New(),
		Node: auditNode(data, config.Audit{})})
	client, tok := transitToken(t, l, "transit:admin", "transit:encrypt:*")
	good := http.Header{"X-Vault-Token": {tok}, "Content-Type": {"application/json"}}
	if resp, body := do(t, http.MethodPost, l.base+"/v1/transit/keys/orders", "", good); resp.StatusCode != http.StatusOK {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	dir := filepath.Join(data, config.DefaultAuditDir)
	l.Node.Tick(t.Context()) // nothing to aggregate yet
	before, sizeBefore := auditFiles(t, dir)

	const n, workers = 1000, 8
	start := time.Now()
	pt := base64.StdEncoding.EncodeToString([]byte("flood"))
	var (
		mu          sync.Mutex
		statuses    = map[int]int{}
		noRetry     int
		goodID      string
		goodStatus  int
		wg          sync.WaitGroup
		next        = make(chan int)
		refusedHdrs = http.Header{"Authorization": {"Bearer x"}, "Content-Type": {"application/json"}}
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if i == n/2 {
					resp, _ := do(t, http.MethodPost, l.base+"/v1/transit/encrypt/orders", `{"plaintext":"`+pt+`"}`, good)
					mu.Lock()
					goodID, goodStatus = resp.Header.Get(httpaudit.RequestIDHeader), resp.StatusCode
					mu.Unlock()
				}
				resp, _ := do(t, http.MethodPost, l.base+"/v1/transit/encrypt/orders", `{"plaintext":"`+pt+`"}`, refusedHdrs)
				mu.Lock()
				statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
					noRetry++
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	l.Node.Tick(t.Context()) // writes the aggregates
	after, sizeAfter := auditFiles(t, dir)
	flood := after[len(before):]
	t.Logf("%d unauthenticated requests (answers %v): %d records, %d bytes", n, statuses, len(flood), sizeAfter-sizeBefore)

	if goodStatus != http.StatusOK {
		t.Fatalf("the authenticated request in the flood: %d", goodStatus)
	}
	if statuses[http.StatusForbidden]+statuses[http.StatusTooManyRequests] != n || statuses[http.StatusTooManyRequests] == 0 || noRetry > 0 {
		t.Errorf("answers %v (%d 429s without Retry-After): want 403 up to the limit, then 429 with Retry-After", statuses, noRetry)
	}
	var single, counted, goodRecords int
	for _, r := range flood {
		switch {
		case r.RequestID == goodID:
			goodRecords++
			if r.Principal.Kind != audit.PrincipalClient || r.Principal.ID != client || r.Result != audit.ResultOK || r.Operation != "transit.encrypt" {
				t.Errorf("the authenticated request's record %+v: want transit.encrypt ok by %s", r, client)
			}
		case r.Count > 0:
			counted += int(r.Count)
			if r.Status != http.StatusTooManyRequests || r.Result != audit.ResultRefused || !r.Remote.IsLoopback() || r.Since.IsZero() || r.Since.After(r.Time) {
				t.Errorf("aggregate record %+v: want 429 refused from loopback, since before time", r)
			}
		default:
			single++
			if r.Principal.Kind != audit.PrincipalNone || r.Result != audit.ResultRefused {
				t.Errorf("record %+v: want an unauthenticated refusal", r)
			}
		}
	}
	if goodRecords != 1 {
		t.Errorf("%d records of the authenticated request, want 1", goodRecords)
	}
	if single != statuses[http.StatusForbidden] || counted != statuses[http.StatusTooManyRequests] {
		t.Errorf("%d single records for %d 403s, aggregates counting %d for %d 429s: every refusal must be accounted for",
			single, statuses[http.StatusForbidden], counted, statuses[http.StatusTooManyRequests])
	}
	// The refusals recorded one by one, one aggregate, and the
	// authenticated request: a bound that does not grow with n.
	if max := mostRecorded(start) + 2; len(flood) > max || sizeAfter-sizeBefore > int64(max)*600 {
		t.Errorf("%d records, %d bytes for %d unauthenticated requests: want at most %d records", len(flood), sizeAfter-sizeBefore, n, max)
	}
	if bytes.Contains(readAll(t, dir), []byte("Bearer")) {
		t.Error("a record holds the Authorization header")
	}
}

// mostRecorded is how many refusals before authentication one address
// can have recorded one by one since start: the limit's burst, and what
// it refilled since (the flood's own time, a few seconds on a loaded
// machine).
func mostRecorded(start time.Time) int {
	lim := node.RefusalLimit
	return lim.Burst + int(time.Since(start).Seconds()*lim.Rate) + 1
}

func readAll(t *testing.T, dir string) []byte {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "audit-*.jsonl"))
	var all []byte
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestAuditUnauthenticatedEveryEndpoint: every audited endpoint that can
// refuse a caller before authenticating it is under the same per-address
// limit: the admin API and its audit status without the admin token, the
// token endpoints with an unknown client, a wrong method, seal without a
// credential and unseal with a body that is not one. Flooded together
// from one address, each ends up answering 429, and the records are the
// limit's burst and one aggregate per operation and reason.
func TestAuditUnauthenticatedEveryEndpoint(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	l := startLive(t, server.Config{AdminToken: auditAdminToken, Node: auditNode(data, config.Audit{})})
	dir := filepath.Join(data, config.DefaultAuditDir)
	before, sizeBefore := auditFiles(t, dir)
	unknown := form()
	unknown.Set("Authorization", basicAuth("kgc_nobody", "wrong"))
	sys := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		name, method, url, body string
		h                       http.Header
	}{
		{"admin API without the token", http.MethodGet, l.admin + "/v1/admin/clients", "", nil},
		{"admin API with a wrong token", http.MethodPost, l.admin + "/v1/admin/clients", `{}`, adminJSON("wrong-token-0123456789abcdef0123456789")},
		{"audit status without the token", http.MethodGet, l.admin + "/v1/admin/audit", "", nil},
		{"token endpoint, unknown client", http.MethodPost, l.base + "/oauth2/token", "grant_type=client_credentials", unknown},
		{"introspection, unknown client", http.MethodPost, l.base + "/oauth2/introspect", "token=x", unknown},
		{"revocation, unknown client", http.MethodPost, l.base + "/oauth2/revoke", "token=x", unknown},
		{"login, unknown client", http.MethodPost, l.base + "/v1/login", "username=a&password=b", unknown},
		{"token endpoint, wrong method", http.MethodGet, l.base + "/oauth2/token", "", nil},
		{"transit without a token", http.MethodPost, l.base + "/v1/transit/encrypt/k", `{}`, nil},
		{"seal without a credential", http.MethodPost, l.admin + "/v1/sys/seal", `{}`, sys},
		{"unseal with a bad body", http.MethodPost, l.admin + "/v1/sys/unseal", `{"nope":1}`, sys},
	}
	const each = 100
	start := time.Now()
	throttled := map[string]int{}
	for range each {
		for _, c := range cases {
			resp, body := do(t, c.method, c.url, c.body, c.h)
			switch {
			case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "":
				throttled[c.name]++
			case resp.StatusCode < 400 || resp.StatusCode == http.StatusTooManyRequests:
				t.Fatalf("%s: %d %s", c.name, resp.StatusCode, body)
			}
		}
	}
	l.Node.Tick(t.Context())
	after, sizeAfter := auditFiles(t, dir)
	flood := after[len(before):]
	t.Logf("%d unauthenticated requests to %d endpoints: %d records, %d bytes", each*len(cases), len(cases), len(flood), sizeAfter-sizeBefore)
	var single, counted int
	for _, r := range flood {
		if r.Count > 0 {
			counted += int(r.Count)
		} else {
			single++
		}
	}
	total := 0
	for _, c := range cases {
		if throttled[c.name] < each/2 {
			t.Errorf("%s: %d of %d answered 429, want every one past the limit", c.name, throttled[c.name], each)
		}
		total += throttled[c.name]
	}
	if counted != total || single+counted != each*len(cases) {
		t.Errorf("%d single records and aggregates counting %d for %d requests, %d throttled", single, counted, each*len(cases), total)
	}
	// One by one within the limit, and an aggregate per operation and
	// reason (at most two reasons per case).
	if max := mostRecorded(start) + 2*len(cases); len(flood) > max {
		t.Errorf("%d records for %d unauthenticated requests, want at most %d", len(flood), each*len(cases), max)
	}
}

// TestAuditUnsealAttemptsLimited: every unseal attempt writes two records
// (pending, then its outcome) whoever sends it, so attempts are charged to
// their address before they are made: a flood of wrong keys writes the
// limit's burst of attempts and one aggregate, and the right key, sent
// once the address may try again (Retry-After), unseals.
func TestAuditUnsealAttemptsLimited(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a flood of unseal attempts, then a wait for Retry-After; run without -short")
	}
	cfg, _, keyFile := rotatingConfig(t)
	cfg.Node.RefusalLimit = ratelimit.Limit{}
	l := startLive(t, cfg)
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "{}", adminJSON(cfg.AdminToken)); resp.StatusCode != http.StatusOK {
		t.Fatalf("seal: %d %s", resp.StatusCode, body)
	}
	dir := filepath.Join(cfg.Node.DataDir, config.DefaultAuditDir)
	before, _ := auditFiles(t, dir)
	const n = 200
	codes := map[int]int{}
	var retry string
	start := time.Now()
	for range n {
		resp, _ := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", `{"key":"`+randomKey(t)+`"}`, jsonHeader)
		codes[resp.StatusCode]++
		retry = resp.Header.Get("Retry-After")
	}
	lim, most := node.RefusalLimit, mostRecorded(start)
	if tried := codes[http.StatusBadRequest]; tried < lim.Burst || tried > most || tried+codes[http.StatusTooManyRequests] != n || retry == "" {
		t.Errorf("answers %v (last Retry-After %q): want %d to %d refused 400, then 429 with Retry-After", codes, retry, lim.Burst, most)
	}
	l.Node.Tick(t.Context())
	after, _ := auditFiles(t, dir)
	flood := after[len(before):]
	var counted uint64
	for _, r := range flood {
		counted += r.Count
	}
	if want := 2*codes[http.StatusBadRequest] + 1; len(flood) != want || counted != uint64(codes[http.StatusTooManyRequests]) {
		t.Errorf("%d records, aggregates counting %d, for %d attempts: want %d (two per attempt tried, one aggregate counting every 429)", len(flood), counted, n, want)
	}
	wait, _ := strconv.Atoi(retry)
	time.Sleep(time.Duration(wait) * time.Second)
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	right, _ := json.Marshal(map[string]string{"key": strings.TrimSpace(string(key))})
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/unseal", string(right), jsonHeader); resp.StatusCode != http.StatusOK || l.Sealed() {
		t.Fatalf("the right key after Retry-After: %d %s", resp.StatusCode, body)
	}
}
