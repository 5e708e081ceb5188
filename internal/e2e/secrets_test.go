package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	vault "github.com/hashicorp/vault/api"

	"github.com/keygate/keygate/internal/audit"
	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/node"
	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/internal/telemetry"
)

// TestSecretsServed: a node with a token service serves the secret store
// at Vault's KV version 2 mount and the sys endpoints Vault's clients call
// first, to Vault's Go client unchanged; every KV request is audited with
// its path and version and never its value, and neither the audit log nor
// the SQLite store holds a value written.
func TestSecretsServed(t *testing.T) {
	sink := &captureSink{}
	dir := filepath.Join(t.TempDir(), "data")
	metrics := telemetry.New()
	l := startLive(t, server.Config{AdminToken: auditAdminToken, Metrics: metrics,
		Node: auditNode(dir, config.Audit{File: config.AuditFile{Disabled: true}}, sink)})
	_, tok := transitToken(t, l, "secrets:read:*", "secrets:write:*", "secrets:delete:*", "secrets:list:*", "secrets:admin",
		"totp:admin", "totp:code:*", "totp:validate:*", "passwords:admin", "passwords:generate:*")
	cfg := vault.DefaultConfig()
	cfg.Address = l.base
	c, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(tok)
	ctx := t.Context()

	health, err := c.Sys().HealthWithContext(ctx)
	if err != nil || !health.Initialized || health.Sealed || health.Standby {
		t.Errorf("sys/health: %+v, %v", health, err)
	}
	mounts, err := c.Sys().ListMountsWithContext(ctx)
	if err != nil || mounts["secret/"] == nil || mounts["secret/"].Type != "kv" || mounts["secret/"].Options["version"] != "2" ||
		mounts["transit/"] == nil || mounts["transit/"].Type != "transit" {
		t.Errorf("sys/mounts: %v, %v", mounts, err)
	}
	ui, err := c.Logical().ReadWithContext(ctx, "sys/internal/ui/mounts/secret/app/db")
	if err != nil || ui == nil || ui.Data["type"] != "kv" || ui.Data["path"] != "secret/" {
		t.Errorf("sys/internal/ui/mounts: %+v, %v", ui, err)
	}
	self, err := c.Auth().Token().LookupSelfWithContext(ctx)
	if err != nil || self == nil || !slices.Contains(toStrings(self.Data["policies"]), "secrets:admin") {
		t.Errorf("lookup-self: %+v, %v", self, err)
	}

	const value = "correct horse battery staple, never stored in the clear"
	kv := c.KVv2("secret")
	if _, err := kv.Put(ctx, "app/db", map[string]any{"password": value, "user": "app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Patch(ctx, "app/db", map[string]any{"user": "app2"}); err != nil {
		t.Fatal(err)
	}
	s, err := kv.Get(ctx, "app/db")
	if err != nil || s.Data["password"] != value || s.Data["user"] != "app2" || s.VersionMetadata.Version != 2 {
		t.Fatalf("get: %+v, %v", s, err)
	}
	if s, err := kv.GetVersion(ctx, "app/db", 1); err != nil || s.Data["user"] != "app" {
		t.Errorf("version 1: %+v, %v", s, err)
	}
	if err := kv.DeleteVersions(ctx, "app/db", []int{1}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Undelete(ctx, "app/db", []int{1}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Destroy(ctx, "app/db", []int{1}); err != nil {
		t.Fatal(err)
	}
	meta, err := kv.GetMetadata(ctx, "app/db")
	if err != nil || meta.CurrentVersion != 2 || len(meta.Versions) != 2 || !meta.Versions["1"].Destroyed {
		t.Errorf("metadata: %+v, %v", meta, err)
	}
	list, err := c.Logical().ListWithContext(ctx, "secret/metadata/app")
	if err != nil || list == nil || !slices.Equal(toStrings(list.Data["keys"]), []string{"db"}) {
		t.Errorf("list: %+v, %v", list, err)
	}

	// One-time codes and passwords, as Vault's TOTP engine and password
	// policies serve them, kept beside the secrets but not among them.
	if _, err := c.Logical().WriteWithContext(ctx, "totp/keys/ana", map[string]any{"key": "JBSWY3DPEHPK3PXPJBSWY3DP"}); err != nil {
		t.Fatal(err)
	}
	code, err := c.Logical().ReadWithContext(ctx, "totp/code/ana")
	if err != nil || code == nil {
		t.Fatalf("totp code: %v", err)
	}
	if v, err := c.Logical().WriteWithContext(ctx, "totp/code/ana", map[string]any{"code": code.Data["code"]}); err != nil || v.Data["valid"] != true {
		t.Errorf("totp validate: %+v, %v", v, err)
	}
	if _, err := c.Logical().WriteWithContext(ctx, "sys/policies/password/p", map[string]any{
		"policy": "length = 16\nrule \"charset\" { charset = \"abcdef\" }"}); err != nil {
		t.Fatal(err)
	}
	if g, err := c.Logical().ReadWithContext(ctx, "sys/policies/password/p/generate"); err != nil || len(fmt.Sprint(g.Data["password"])) != 16 {
		t.Errorf("password: %+v, %v", g, err)
	}
	if top, err := c.Logical().ListWithContext(ctx, "secret/metadata/"); err != nil || top == nil || !slices.Equal(toStrings(top.Data["keys"]), []string{"app/"}) {
		t.Errorf("the secrets' top folder: %+v, %v", top, err)
	}

	snap, err := metrics.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range []string{`keygate_secret_requests_total{op="secret.write",reason="",result="ok"}`,
		`keygate_credential_requests_total{op="totp.code.validate",reason="",result="ok"}`,
		`keygate_credential_requests_total{op="password_policy.generate",reason="",result="ok"}`} {
		if snap[series] < 1 {
			t.Errorf("%s = %v", series, snap[series])
		}
	}

	// A secret's path with dot segments is refused by the KV API, not
	// redirected by the node's router.
	resp, body := do(t, http.MethodGet, l.base+"/v1/secret/data/app/../db", "", http.Header{"X-Vault-Token": {tok}})
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(body), `{"errors":[`) {
		t.Errorf("a path with ..: %d %s", resp.StatusCode, body)
	}

	var ops []audit.Operation
	for _, r := range sink.Take(t) {
		if strings.HasPrefix(string(r.Operation), "secret.") && r.Result != audit.ResultPending {
			ops = append(ops, r.Operation)
			if !slices.Contains([]string{"app/db", "app/", "app", ""}, r.Key.Name) || r.Key.Name == "" && r.Operation != "secret.list" && r.Status != http.StatusBadRequest {
				t.Errorf("record %s names %q", r.Operation, r.Key.Name)
			}
		}
	}
	for _, op := range []audit.Operation{"secret.write", "secret.patch", "secret.read", "secret.delete", "secret.undelete",
		"secret.destroy", "secret.metadata.read"} {
		if !slices.Contains(ops, op) {
			t.Errorf("no %s record among %v", op, ops)
		}
	}
	if bytes.Contains(sink.All(), []byte(value)) {
		t.Error("an audit record holds the secret's value")
	}
	for _, f := range []string{node.StoreFile, node.StoreFile + "-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(value)) || bytes.Contains(b, []byte("app2")) {
			t.Errorf("%s holds a value written", f)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, e := range l {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
