package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
)

// TestAuditUnauthenticatedFloodManyAddresses: refusals before
// authentication from many addresses — here 2,000 /64s of one /48, which
// anyone can get for free from a tunnel broker, behind a trusted proxy —
// are recorded one by one only up to a node-wide bound; the rest are
// answered 429 and counted in aggregate records. The per-address limit
// alone gives each /64 its own 30, so the flood wrote a record per request
// as it did before that limit.
func TestAuditUnauthenticatedFloodManyAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a flood of unauthenticated requests from many addresses; run without -short")
	}
	data := filepath.Join(t.TempDir(), "data")
	nc := auditNode(data, config.Audit{})
	nc.TokenService.TrustedProxies = []string{"127.0.0.1/32"}
	l := startLive(t, server.Config{AdminToken: auditAdminToken, Node: nc})
	dir := filepath.Join(data, config.DefaultAuditDir)
	l.Node.Tick(t.Context())
	before, sizeBefore := auditFiles(t, dir)
	const n, workers = 2000, 8
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	var mu sync.Mutex
	codes := map[int]int{}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				h := http.Header{"Authorization": {"Bearer x"}, "Content-Type": {"application/json"},
					"X-Forwarded-For": {fmt.Sprintf("2001:db8:4711:%x::1", i)}}
				resp, _ := do(t, http.MethodPost, l.base+"/v1/transit/encrypt/orders", `{"plaintext":"eA=="}`, h)
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	l.Node.Tick(t.Context())
	after, sizeAfter := auditFiles(t, dir)
	flood := after[len(before):]
	var single int
	var counted uint64
	for _, r := range flood {
		if r.Count > 0 {
			counted += r.Count
		} else {
			single++
		}
	}
	t.Logf("%d requests from %d /64s (answers %v): %d single records, aggregates counting %d, %d bytes", n, n, codes, single, counted, sizeAfter-sizeBefore)
	if single+int(counted) != n {
		t.Errorf("%d single records and aggregates counting %d for %d requests: every refusal must be accounted for", single, counted, n)
	}
	if most := mostRecordedNode(start); single > most || codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("%d refusals recorded one by one (answers %v), want at most %d (the node-wide budget), then 429", single, codes, most)
	}
	// The rest in one aggregate (one operation and no address), not one
	// per address: the disk holds the node-wide budget's records.
	if aggregates := len(flood) - single; aggregates > 1 {
		t.Errorf("%d aggregate records for a flood of one operation from %d addresses, want 1", aggregates, n)
	}
}

// mostRecordedNode is how many refusals before authentication a node can
// have recorded one by one, from every address together, since start.
func mostRecordedNode(start time.Time) int {
	lim := node.RefusalTotalLimit
	return lim.Burst + int(time.Since(start).Seconds()*lim.Rate) + 1
}
