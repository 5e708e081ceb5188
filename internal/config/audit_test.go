package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAudit(t *testing.T) {
	body := `
audit:
  node: node-a
  file: {dir: /var/log/keygate, max_size: 1048576, sync: interval, sync_interval: 2s, min_free: 2147483648}
  stdout: true
  store: true
  checkpoint_every: 100
  checkpoint_interval: 5s
`
	c, err := Load(writeConfig(t, body), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Audit{Node: "node-a", File: AuditFile{Dir: "/var/log/keygate", MaxSize: 1 << 20, Sync: "interval", SyncInterval: 2 * time.Second, MinFree: 2 << 30},
		Stdout: true, Store: true, CheckpointEvery: 100, CheckpointInterval: 5 * time.Second}
	if c.Audit != want {
		t.Errorf("audit %+v, want %+v", c.Audit, want)
	}
	// Unset, audit is on with the file sink under the data directory.
	c, err = Load(writeConfig(t, "data_dir: /srv/kg\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Audit.WithDefaults(c.DataDir); a.Disabled || a.File.Disabled || a.File.Dir != filepath.Join("/srv/kg", "audit") || a.File.Sync != "interval" {
		t.Errorf("default audit %+v", a)
	}
}

func TestAuditErrors(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"node", "audit: {node: \"a b\"}\n", "audit.node"},
		{"max size", "audit: {file: {max_size: -1}}\n", "audit.file.max_size"},
		{"min free", "audit: {file: {min_free: -2}}\n", "audit.file.min_free"},
		{"sync", "audit: {file: {sync: always}}\n", "audit.file.sync: must be one of batch, interval, never"},
		{"sync interval", "audit: {file: {sync_interval: -1s}}\n", "audit.file.sync_interval"},
		{"checkpoint every", "audit: {checkpoint_every: -1}\n", "audit.checkpoint_every"},
		{"checkpoint interval", "audit: {checkpoint_interval: -1s}\n", "audit.checkpoint_interval"},
		{"no sink", "audit: {file: {disabled: true}}\n", "audit: no sink"},
		{"unknown field", "audit: {files: {}}\n", "files"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, c.body), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one naming %q", err, c.want)
			}
		})
	}
	// Off, no sink is needed.
	if _, err := Load(writeConfig(t, "audit: {disabled: true, file: {disabled: true}}\n"), nil); err != nil {
		t.Errorf("audit off: %v", err)
	}
}
