package kvapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"
)

// TestVaultClient drives every KV version 2 operation through Vault's
// official Go client, step by step on one path.
func TestVaultClient(t *testing.T) {
	e := start(t)
	c := e.client("default")
	kv := c.KVv2("secret")
	ctx := context.Background()

	steps := []struct {
		name string
		do   func(t *testing.T)
	}{
		{"put version 1", func(t *testing.T) {
			s, err := kv.Put(ctx, "app/db", map[string]any{"user": "u", "password": "p1"})
			if err != nil || s.VersionMetadata.Version != 1 || s.VersionMetadata.CreatedTime.IsZero() {
				t.Fatalf("%+v %v", s, err)
			}
		}},
		{"put version 2 with cas", func(t *testing.T) {
			s, err := kv.Put(ctx, "app/db", map[string]any{"user": "u", "password": "p2"}, vault.WithCheckAndSet(1))
			if err != nil || s.VersionMetadata.Version != 2 {
				t.Fatalf("%+v %v", s, err)
			}
		}},
		{"cas mismatch is 400", func(t *testing.T) {
			_, err := kv.Put(ctx, "app/db", map[string]any{"x": "y"}, vault.WithCheckAndSet(1))
			if statusOf(err) != http.StatusBadRequest {
				t.Fatalf("err %v", err)
			}
		}},
		{"get latest", func(t *testing.T) {
			s, err := kv.Get(ctx, "app/db")
			if err != nil || s.Data["password"] != "p2" || s.VersionMetadata.Version != 2 || !s.VersionMetadata.DeletionTime.IsZero() {
				t.Fatalf("%+v %v", s, err)
			}
		}},
		{"get version 1", func(t *testing.T) {
			s, err := kv.GetVersion(ctx, "app/db", 1)
			if err != nil || s.Data["password"] != "p1" {
				t.Fatalf("%+v %v", s, err)
			}
		}},
		{"patch", func(t *testing.T) {
			s, err := kv.Patch(ctx, "app/db", map[string]any{"password": "p3", "user": nil})
			if err != nil || s.VersionMetadata.Version != 3 {
				t.Fatalf("%+v %v", s, err)
			}
			g, err := kv.Get(ctx, "app/db")
			if err != nil || g.Data["password"] != "p3" || g.Data["user"] != nil {
				t.Fatalf("after patch %+v %v", g, err)
			}
		}},
		{"metadata put and get", func(t *testing.T) {
			err := kv.PutMetadata(ctx, "app/db", vault.KVMetadataPutInput{MaxVersions: 5, CASRequired: false,
				DeleteVersionAfter: 3*time.Hour + 25*time.Minute + 19*time.Second, CustomMetadata: map[string]any{"owner": "billing"}})
			if err != nil {
				t.Fatal(err)
			}
			m, err := kv.GetMetadata(ctx, "app/db")
			if err != nil || m.MaxVersions != 5 || m.CurrentVersion != 3 || m.OldestVersion != 1 || len(m.Versions) != 3 ||
				m.CustomMetadata["owner"] != "billing" || m.DeleteVersionAfter != 3*time.Hour+25*time.Minute+19*time.Second {
				t.Fatalf("%+v %v", m, err)
			}
		}},
		{"metadata patch", func(t *testing.T) {
			n := 7
			if err := kv.PatchMetadata(ctx, "app/db", vault.KVMetadataPatchInput{MaxVersions: &n,
				CustomMetadata: map[string]any{"team": "pay"}}); err != nil {
				t.Fatal(err)
			}
			m, err := kv.GetMetadata(ctx, "app/db")
			if err != nil || m.MaxVersions != 7 || m.CustomMetadata["owner"] != "billing" || m.CustomMetadata["team"] != "pay" {
				t.Fatalf("%+v %v", m, err)
			}
			s, err := kv.Get(ctx, "app/db")
			if err != nil || s.CustomMetadata["team"] != "pay" {
				t.Fatalf("custom metadata with the read: %+v %v", s, err)
			}
		}},
		{"delete latest", func(t *testing.T) {
			if err := kv.Delete(ctx, "app/db"); err != nil {
				t.Fatal(err)
			}
			s, err := kv.Get(ctx, "app/db")
			if err != nil || s.Data != nil || s.VersionMetadata == nil || s.VersionMetadata.DeletionTime.IsZero() {
				t.Fatalf("a deleted version reads as its metadata: %+v %v", s, err)
			}
		}},
		{"undelete", func(t *testing.T) {
			if err := kv.Undelete(ctx, "app/db", []int{3}); err != nil {
				t.Fatal(err)
			}
			s, err := kv.Get(ctx, "app/db")
			if err != nil || s.Data["password"] != "p3" {
				t.Fatalf("%+v %v", s, err)
			}
		}},
		{"delete versions", func(t *testing.T) {
			if err := kv.DeleteVersions(ctx, "app/db", []int{1}); err != nil {
				t.Fatal(err)
			}
			s, err := kv.GetVersion(ctx, "app/db", 1)
			if err != nil || s.Data != nil || s.VersionMetadata.DeletionTime.IsZero() {
				t.Fatalf("%+v %v", s, err)
			}
		}},
		{"destroy", func(t *testing.T) {
			if err := kv.Destroy(ctx, "app/db", []int{2}); err != nil {
				t.Fatal(err)
			}
			s, err := kv.GetVersion(ctx, "app/db", 2)
			if err != nil || s.Data != nil || !s.VersionMetadata.Destroyed {
				t.Fatalf("%+v %v", s, err)
			}
		}},
		{"list", func(t *testing.T) {
			if _, err := kv.Put(ctx, "app/web/tls", map[string]any{"k": "v"}); err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Put(ctx, "top", map[string]any{"k": "v"}); err != nil {
				t.Fatal(err)
			}
			for folder, want := range map[string][]string{"secret/metadata": {"app/", "top"}, "secret/metadata/app": {"db", "web/"},
				"secret/metadata/app/": {"db", "web/"}} {
				s, err := c.Logical().List(folder)
				if err != nil || s == nil {
					t.Fatalf("%s: %v %v", folder, s, err)
				}
				var got []string
				for _, k := range s.Data["keys"].([]any) {
					got = append(got, k.(string))
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: %v, want %v", folder, got, want)
				}
			}
			if s, err := c.Logical().List("secret/metadata/none/"); s != nil || err != nil {
				t.Errorf("an empty folder: %v %v", s, err)
			}
		}},
		{"subkeys", func(t *testing.T) {
			if _, err := kv.Put(ctx, "nested", map[string]any{"a": map[string]any{"b": "c"}, "d": 1}); err != nil {
				t.Fatal(err)
			}
			s, err := c.Logical().ReadWithData("secret/subkeys/nested", map[string][]string{"depth": {"1"}})
			if err != nil || s == nil {
				t.Fatalf("%v %v", s, err)
			}
			sk := s.Data["subkeys"].(map[string]any)
			if len(sk) != 2 || sk["a"] != nil || sk["d"] != nil {
				t.Errorf("subkeys %v", sk)
			}
		}},
		{"config", func(t *testing.T) {
			if _, err := c.Logical().Write("secret/config", map[string]any{"max_versions": 4, "delete_version_after": "1h"}); err != nil {
				t.Fatal(err)
			}
			s, err := c.Logical().Read("secret/config")
			if err != nil || s.Data["delete_version_after"] != "1h0m0s" || s.Data["cas_required"] != false {
				t.Fatalf("%+v %v", s, err)
			}
		}},
		{"delete metadata", func(t *testing.T) {
			if err := kv.DeleteMetadata(ctx, "app/db"); err != nil {
				t.Fatal(err)
			}
			_, err := kv.Get(ctx, "app/db")
			if !errors.Is(err, vault.ErrSecretNotFound) {
				t.Fatalf("read after metadata delete: %v", err)
			}
			if _, err := kv.GetMetadata(ctx, "app/db"); !errors.Is(err, vault.ErrSecretNotFound) {
				t.Fatalf("metadata after delete: %v", err)
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.do) {
			t.FailNow() // later steps build on this one
		}
	}
}

// TestConcurrentClients: clients of several tenants writing and reading at
// once share nothing through the handler: each tenant's path ends with
// every one of its writes as a version, and reads see only its own data.
func TestConcurrentClients(t *testing.T) {
	e := start(t)
	const tenants, writers, writes = 3, 4, 10
	if err := e.setMaxVersions(tenants); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, tenants*writers)
	for ti := range tenants {
		tenant := fmt.Sprint("t", ti)
		for range writers {
			go func() {
				kv := e.client(tenant).KVv2("secret")
				for range writes {
					if _, err := kv.Put(context.Background(), "shared", map[string]any{"tenant": tenant}); err != nil {
						done <- err
						return
					}
					s, err := kv.Get(context.Background(), "shared")
					if err != nil || s.Data["tenant"] != tenant {
						done <- fmt.Errorf("%s read %v: %v", tenant, s, err)
						return
					}
				}
				done <- nil
			}()
		}
	}
	for range tenants * writers {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for ti := range tenants {
		m, err := e.client(fmt.Sprint("t", ti)).KVv2("secret").GetMetadata(context.Background(), "shared")
		if err != nil || m.CurrentVersion != writers*writes {
			t.Errorf("tenant %d: %+v %v", ti, m, err)
		}
	}
}

// setMaxVersions lets n tenants keep every version the test writes.
func (e *env) setMaxVersions(n int) error {
	for ti := range n {
		if _, err := e.client(fmt.Sprint("t", ti)).Logical().Write("secret/config", map[string]any{"max_versions": 100}); err != nil {
			return err
		}
	}
	return nil
}
