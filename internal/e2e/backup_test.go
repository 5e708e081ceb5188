package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/rootkey"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/store/postgres"
	"github.com/keygate/keygate/internal/store/snapshot"
	"github.com/keygate/keygate/internal/store/sqlite"
)

// backupBackend opens a node's store on one backend: a fresh SQLite data
// directory, or a fresh PostgreSQL schema.
type backupBackend struct {
	name string
	// place returns the token service settings and data directory of a
	// new, empty store, and a function that opens that store directly.
	place func(t *testing.T) (config.TokenService, string, func() (interface {
		Restore(context.Context, *snapshot.Snapshot) error
		Close() error
	}, error))
}

func backupBackends() []backupBackend {
	type restorer = interface {
		Restore(context.Context, *snapshot.Snapshot) error
		Close() error
	}
	return []backupBackend{
		{"sqlite", func(t *testing.T) (config.TokenService, string, func() (restorer, error)) {
			dir := filepath.Join(t.TempDir(), "data")
			return config.TokenService{}, dir, func() (restorer, error) {
				return sqlite.Open(context.Background(), filepath.Join(dir, node.StoreFile))
			}
		}},
		{"postgres", func(t *testing.T) (config.TokenService, string, func() (restorer, error)) {
			if os.Getenv("DATABASE_URL") == "" {
				t.Skip("needs PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
			}
			u := newSchema(t)
			return config.TokenService{DatabaseURL: u}, filepath.Join(t.TempDir(), "data"), func() (restorer, error) {
				return postgres.Open(context.Background(), u)
			}
		}},
	}
}

// TestBackupRestore: a node on each backend serves tenants, clients,
// users, signing keys, a transit key, KV secrets (versions, one soft
// deleted, one destroyed) and revocations, and records its audit log in the
// store; a backup taken through its admin API while clients keep writing
// is consistent, and restores into an empty store of each backend. A node
// started there with the same root key publishes the same JWKS, accepts
// the first node's tokens, decrypts its ciphertext, reads its secrets with
// the same versions and metadata, and holds the same audit chain up to
// the backup. The backup request itself is in the audit log.
func TestBackupRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes per pair of backends")
	}
	for _, from := range backupBackends() {
		for _, to := range backupBackends() {
			t.Run(from.name+"_to_"+to.name, func(t *testing.T) { backupRestore(t, from, to) })
		}
	}
}

func backupRestore(t *testing.T, from, to backupBackend) {
	ctx := t.Context()
	keyDir := t.TempDir()
	rootKey := filepath.Join(keyDir, "root.key")
	if err := rootkey.GenerateKeyFile(rootKey, rand.Reader); err != nil {
		t.Fatal(err)
	}
	const iss = "https://keygate.backup.test"
	audit := config.Audit{File: config.AuditFile{Disabled: true}, Store: true}
	srcTS, srcDir, _ := from.place(t)
	srcTS.RootKeyFile = rootKey
	a := startLive(t, server.Config{AdminToken: auditAdminToken,
		Node: &node.Config{DataDir: srcDir, Issuer: iss, Audience: testAudience, Audit: audit, TokenService: srcTS}})

	admin := func(l *live, method, path, body string, want int) []byte {
		t.Helper()
		resp, b := do(t, method, l.admin+path, body, adminJSON(auditAdminToken))
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	admin(a, http.MethodPost, "/v1/admin/tenants", `{"name":"acme"}`, http.StatusCreated)
	admin(a, http.MethodPost, "/v1/admin/users", `{"username":"ana","password":"correct horse battery","scopes":["read"]}`, http.StatusCreated)
	admin(a, http.MethodPost, "/v1/admin/keys/rotate", `{}`, http.StatusOK)
	admin(a, http.MethodPost, "/v1/admin/revocations", fmt.Sprintf(`{"issuer":%q,"jti":"revoked-1","until":%q}`, iss,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), http.StatusCreated)
	clientID, tok := transitToken(t, a, "transit:admin", "transit:encrypt:*", "transit:decrypt:*",
		"secrets:read:*", "secrets:write:*", "secrets:delete:*", "secrets:list:*", "secrets:admin")
	_ = clientID
	vh := http.Header{"X-Vault-Token": {tok}, "Content-Type": {"application/json"}}
	if resp, b := do(t, http.MethodPost, a.base+"/v1/transit/keys/orders", "", vh); resp.StatusCode/100 != 2 {
		t.Fatalf("transit key: %d %s", resp.StatusCode, b)
	}
	const plaintext = "b3JkZXIgNDI=" // "order 42"
	resp, b := do(t, http.MethodPost, a.base+"/v1/transit/encrypt/orders", `{"plaintext":"`+plaintext+`"}`, vh)
	var enc struct {
		Data struct {
			Ciphertext string `json:"ciphertext"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &enc) != nil || enc.Data.Ciphertext == "" {
		t.Fatalf("encrypt: %d %s", resp.StatusCode, b)
	}

	kvOf := func(l *live) *vault.KVv2 {
		cfg := vault.DefaultConfig()
		cfg.Address = l.base
		c, err := vault.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.SetToken(tok)
		return c.KVv2("secret")
	}
	kv := kvOf(a)
	for v := 1; v <= 3; v++ {
		if _, err := kv.Put(ctx, "app/db", map[string]any{"password": fmt.Sprint("pw-", v)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.DeleteVersions(ctx, "app/db", []int{2}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Destroy(ctx, "app/db", []int{1}); err != nil {
		t.Fatal(err)
	}

	// Writers keep going while the backups are taken: new secret paths
	// and versions, new clients.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				kv.Put(loadCtx, fmt.Sprintf("load/%d/%d", w, i%5), map[string]any{"i": i}) //nolint:errcheck // load only
				if i%10 == 0 {
					req, _ := http.NewRequestWithContext(loadCtx, http.MethodPost, a.admin+"/v1/admin/clients", strings.NewReader(fmt.Sprintf(`{"name":"load-%d-%d"}`, w, i)))
					req.Header = adminJSON(auditAdminToken)
					if resp, err := http.DefaultClient.Do(req); err == nil { // not t's: this goroutine may not fail it
						resp.Body.Close()
					}
				}
			}
		}()
	}
	var raw []byte
	for range 3 {
		time.Sleep(50 * time.Millisecond)
		resp, body := do(t, http.MethodGet, a.admin+"/v1/admin/backup", "", http.Header{"Authorization": {"Bearer " + auditAdminToken}})
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != server.SnapshotContentType {
			t.Fatalf("backup: %d %v %.200s", resp.StatusCode, resp.Header, body)
		}
		raw = body
		snap, err := snapshot.Read(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("the backup does not read: %v", err)
		}
		if err := secretsConsistent(snap); err != nil {
			t.Errorf("backup while writing: %v", err)
		}
		// The check finds a snapshot whose tables were read apart: the
		// newest value row of a path written to missing.
		if err := secretsConsistent(dropNewestLoadValue(snap)); err == nil {
			t.Error("the consistency check passes a snapshot missing a value row")
		}
	}
	stopLoad()
	wg.Wait()
	if resp, _ := do(t, http.MethodGet, a.admin+"/v1/admin/backup", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("backup without the admin token: %d", resp.StatusCode)
	}

	snap, err := snapshot.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Header.Backend != from.name {
		t.Errorf("the snapshot's backend: %q", snap.Header.Backend)
	}
	dstTS, dstDir, open := to.place(t)
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Restore(ctx, snap); err != nil {
		t.Fatalf("restore: %v", err)
	}
	st.Close()

	// What the source held at the backup, by the snapshot's own rows.
	auditHeads := map[string]string{}
	for _, tb := range snap.Tables {
		if tb.Name != "audit_log" {
			continue
		}
		for _, r := range tb.Rows {
			auditHeads[r[0].(string)] = fmt.Sprint(r[1], " ", string(r[2].([]byte)))
		}
	}
	if len(auditHeads) == 0 {
		t.Fatal("the snapshot holds no audit records")
	}

	dstTS.RootKeyFile = rootKey
	b2 := startLive(t, server.Config{AdminToken: auditAdminToken,
		Node: &node.Config{DataDir: dstDir, Issuer: iss, Audience: testAudience, Audit: audit, TokenService: dstTS}})

	// The same JWKS, and the first node's token works on the second.
	jwks := func(l *live) string {
		resp, b := do(t, http.MethodGet, l.base+"/.well-known/jwks.json", "", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("jwks: %d", resp.StatusCode)
		}
		return string(b)
	}
	if ja, jb := jwks(a), jwks(b2); ja != jb {
		t.Errorf("JWKS differ:\n%s\n%s", ja, jb)
	}
	vh2 := http.Header{"X-Vault-Token": {tok}, "Content-Type": {"application/json"}}
	resp, b = do(t, http.MethodPost, b2.base+"/v1/transit/decrypt/orders", `{"ciphertext":"`+enc.Data.Ciphertext+`"}`, vh2)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"plaintext":"`+plaintext+`"`) {
		t.Errorf("decrypt on the restored node: %d %s", resp.StatusCode, b)
	}

	// Secrets: the same metadata (versions, deletion, destruction) and values.
	kv2 := kvOf(b2)
	m1, err1 := kv.GetMetadata(ctx, "app/db")
	m2, err2 := kv2.GetMetadata(ctx, "app/db")
	if err1 != nil || err2 != nil || !reflect.DeepEqual(m1, m2) {
		t.Errorf("metadata:\n%+v %v\n%+v %v", m1, err1, m2, err2)
	}
	if m2 == nil || m2.CurrentVersion != 3 || !m2.Versions["1"].Destroyed || m2.Versions["2"].DeletionTime.IsZero() {
		t.Errorf("restored metadata: %+v", m2)
	}
	if s, err := kv2.Get(ctx, "app/db"); err != nil || s.Data["password"] != "pw-3" || s.VersionMetadata.Version != 3 {
		t.Errorf("current version on the restored node: %+v %v", s, err)
	}
	for _, v := range []int{1, 2} { // destroyed, deleted: no data on either node
		s1, err1 := kv.GetVersion(ctx, "app/db", v)
		s2, err2 := kv2.GetVersion(ctx, "app/db", v)
		if (err1 == nil) != (err2 == nil) || (s2 != nil && s2.Data != nil) || (s1 != nil && s2 != nil && !reflect.DeepEqual(s1.VersionMetadata, s2.VersionMetadata)) {
			t.Errorf("version %d: source %+v %v, restored %+v %v", v, s1, err1, s2, err2)
		}
	}

	// Tenants, users, signing keys and revocations, as the admin API and
	// the store give them.
	for _, p := range []string{"/v1/admin/tenants", "/v1/admin/users", "/v1/admin/keys"} {
		if x, y := admin(a, http.MethodGet, p, "", 200), admin(b2, http.MethodGet, p, "", 200); !bytes.Equal(x, y) {
			t.Errorf("GET %s:\n%s\n%s", p, x, y)
		}
	}
	past := time.Now().Add(-time.Hour)
	r1, _ := a.Store().Revocations(ctx, past)
	r2, _ := b2.Store().Revocations(ctx, past)
	if len(r1) == 0 || !reflect.DeepEqual(r1, r2) {
		t.Errorf("revocations:\n%+v\n%+v", r1, r2)
	}
	// Every client of the backup, and only those.
	clients := 0
	for _, tb := range snap.Tables {
		if tb.Name == "clients" {
			clients = len(tb.Rows)
		}
	}
	if cs, err := b2.Store().ListClients(ctx); err != nil || len(cs) != clients {
		t.Errorf("clients on the restored node: %d, %v; the snapshot has %d", len(cs), err, clients)
	}

	// The audit chains up to the backup: each node's last record.
	for n, head := range auditHeads {
		es, err := b2.Store().AuditEntries(ctx, n, 0, 1<<20)
		if err != nil || len(es) == 0 {
			t.Fatalf("audit %s: %v", n, err)
		}
		last := es[len(es)-1]
		if got := fmt.Sprint(last.Seq, " ", string(last.Line)); got != head {
			t.Errorf("audit chain %s's head on the restored node:\n%s\nwant\n%s", n, got, head)
		}
	}
	// The backup was recorded by the source node.
	found := false
	nodes, _ := a.Store().AuditNodes(ctx)
	for _, n := range nodes {
		es, _ := a.Store().AuditEntries(ctx, n, 0, 1<<20)
		for _, e := range es {
			found = found || bytes.Contains(e.Line, []byte(`"admin.backup"`))
		}
	}
	if !found {
		t.Error("no audit record of the backup")
	}
}

// secretsConsistent reports an error unless snap's secrets agree with
// their versions: every version row has its path's row, at a current
// version at least its own, and every path the load writes (load/..., never
// deleted or destroyed) has a value row for each version from its oldest to
// its current. A snapshot that read the tables at different moments breaks
// one or the other, whichever table it read first.
func secretsConsistent(snap *snapshot.Snapshot) error {
	col := func(tb snapshot.Table, name string) int {
		for i, c := range tb.Columns {
			if c.Name == name {
				return i
			}
		}
		return -1
	}
	type span struct{ oldest, current int64 }
	paths := map[string]span{}
	values := map[string]bool{}
	for _, tb := range snap.Tables {
		switch tb.Name {
		case "secrets":
			ti, pi, oi, ci := col(tb, "tenant"), col(tb, "path"), col(tb, "oldest_version"), col(tb, "current_version")
			for _, r := range tb.Rows {
				paths[r[ti].(string)+"/"+r[pi].(string)] = span{r[oi].(int64), r[ci].(int64)}
			}
		case "secret_values":
			ti, pi, vi := col(tb, "tenant"), col(tb, "path"), col(tb, "version")
			for _, r := range tb.Rows {
				values[fmt.Sprintf("%s/%s v%d", r[ti], r[pi], r[vi])] = true
			}
		}
	}
	if len(values) == 0 {
		return fmt.Errorf("the snapshot holds no secret versions")
	}
	for v := range values {
		k, ver, _ := strings.Cut(v, " v")
		var version int64
		fmt.Sscan(ver, &version) //nolint:errcheck // written above
		sp, ok := paths[k]
		if !ok || version > sp.current {
			return fmt.Errorf("secret %s: a version row without its path's row at that version (%+v, %v)", v, sp, ok)
		}
	}
	n := 0
	for k, sp := range paths {
		if !strings.Contains(k, "/load/") {
			continue
		}
		n++
		for v := max(sp.oldest, 1); v <= sp.current; v++ {
			if !values[fmt.Sprintf("%s v%d", k, v)] {
				return fmt.Errorf("secret %s: current version %d (oldest %d) but no value row of version %d", k, sp.current, sp.oldest, v)
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("the snapshot holds none of the load's secrets")
	}
	return nil
}

// dropNewestLoadValue returns snap without the secret_values row of a load
// path's current version, as a read of secret_values before that version's
// write and of secrets after it would be.
func dropNewestLoadValue(snap *snapshot.Snapshot) *snapshot.Snapshot {
	out := *snap
	out.Tables = append([]snapshot.Table(nil), snap.Tables...)
	for i, tb := range out.Tables {
		if tb.Name != "secret_values" {
			continue
		}
		pi, vi := -1, -1
		for j, c := range tb.Columns {
			switch c.Name {
			case "path":
				pi = j
			case "version":
				vi = j
			}
		}
		best := -1
		for j, r := range tb.Rows {
			if strings.HasPrefix(r[pi].(string), "load/") && (best < 0 || r[vi].(int64) > tb.Rows[best][vi].(int64)) {
				best = j
			}
		}
		if best >= 0 {
			rows := append([][]any(nil), tb.Rows[:best]...)
			out.Tables[i].Rows = append(rows, tb.Rows[best+1:]...)
		}
	}
	return &out
}

// TestBackupSealed: a sealed node, which holds no root key, still answers
// a backup (the snapshot needs none), and it is the same as the unsealed
// node's but for the audit records written between the two.
func TestBackupSealed(t *testing.T) {
	l := startLive(t, server.Config{AdminToken: auditAdminToken,
		Node: auditNode(filepath.Join(t.TempDir(), "data"), config.Audit{File: config.AuditFile{Disabled: true}, Store: true})})
	backup := func() *snapshot.Snapshot {
		t.Helper()
		resp, body := do(t, http.MethodGet, l.admin+"/v1/admin/backup", "", http.Header{"Authorization": {"Bearer " + auditAdminToken}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("backup: %d %.300s", resp.StatusCode, body)
		}
		s, err := snapshot.Read(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := backup()
	if resp, body := do(t, http.MethodPost, l.admin+"/v1/sys/seal", "", adminJSON(auditAdminToken)); resp.StatusCode != http.StatusOK || !l.Sealed() {
		t.Fatalf("seal: %d %s", resp.StatusCode, body)
	}
	after := backup()
	for i, tb := range before.Tables {
		if tb.Name != "audit_log" && !reflect.DeepEqual(tb, after.Tables[i]) {
			t.Errorf("table %s differs after sealing", tb.Name)
		}
	}
}

// TestBackupOutlastsWriteTimeout: a backup that takes longer than the
// listener's write timeout — a large store, or a client that reads slowly
// — arrives whole while its client keeps reading.
func TestBackupOutlastsWriteTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a backup slowly for longer than the write timeout")
	}
	l := startLive(t, server.Config{AdminToken: auditAdminToken,
		Node: auditNode(filepath.Join(t.TempDir(), "data"), config.Audit{})})
	// 24 MiB of sealed values, far more than the sockets buffer.
	blob := bytes.Repeat([]byte{0xa5}, 512<<10)
	for i := range 48 {
		now := time.Now().UTC()
		m := store.SecretMeta{Tenant: store.DefaultTenant, Path: fmt.Sprintf("big/%02d", i), Sealed: []byte("m"), CurrentVersion: 1,
			OldestVersion: 1, CreatedAt: now, UpdatedAt: now}
		if _, err := l.Node.Store().PutSecret(t.Context(), m, &store.SecretValue{Version: 1, Sealed: blob, CreatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, l.admin+"/v1/admin/backup", nil)
	req.Header.Set("Authorization", "Bearer "+auditAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("backup: %d", resp.StatusCode)
	}
	var got bytes.Buffer
	start := time.Now()
	chunk := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(chunk)
		got.Write(chunk[:n])
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("after %v and %d bytes: %v", time.Since(start), got.Len(), err)
		}
		time.Sleep(25 * time.Millisecond) // about 2.5 MiB a second at most
	}
	took := time.Since(start)
	if took <= server.WriteTimeout {
		t.Fatalf("the backup took %v, not longer than the write timeout %v: the test proves nothing", took, server.WriteTimeout)
	}
	s, err := snapshot.Read(&got)
	if err != nil {
		t.Fatalf("the backup read over %v: %v", took, err)
	}
	for _, tb := range s.Tables {
		if tb.Name == "secret_values" && len(tb.Rows) != 48 {
			t.Errorf("%d secret values in the backup, want 48", len(tb.Rows))
		}
	}
	t.Logf("%d bytes in %v", got.Len(), took)
}
