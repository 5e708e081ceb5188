package secrets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keygate/keygate/internal/store"
)

var ctx = context.Background()

func TestWriteRead(t *testing.T) {
	k := newKit(t)
	v1 := k.write(t, def, "app/db", `{"user": "alice", "n": 1.50}`)
	k.clock.add(time.Second)
	v2 := k.write(t, def, "app/db", `{"user":"bob"}`)
	if v1.Version != 1 || v2.Version != 2 || !v1.CreatedTime.Equal(t0) || !v2.CreatedTime.Equal(t0.Add(time.Second)) {
		t.Fatalf("versions %+v %+v", v1, v2)
	}
	for _, tc := range []struct {
		version int
		data    string
		meta    VersionMeta
	}{
		{0, `{"user":"bob"}`, v2},
		{2, `{"user":"bob"}`, v2},
		{1, `{"user":"alice","n":1.50}`, v1},
	} {
		s := k.read(t, def, "app/db", tc.version)
		if string(s.Data) != tc.data || s.Meta != tc.meta || s.CustomMetadata != nil {
			t.Errorf("Read(v%d) = %s %+v %v, want %s %+v", tc.version, s.Data, s.Meta, s.CustomMetadata, tc.data, tc.meta)
		}
	}
	for _, tc := range []struct {
		name    string
		path    string
		version int
		want    error
	}{
		{"a version to come", "app/db", 3, ErrNotFound},
		{"no such path", "app/nope", 0, ErrNotFound},
		{"a folder", "app", 0, ErrNotFound},
		{"a negative version", "app/db", -1, ErrInvalid},
		{"an empty path", "", 0, ErrInvalid},
		{"a path with ..", "app/../db", 0, ErrInvalid},
		{"a path with a trailing slash", "app/db/", 0, ErrInvalid},
	} {
		_, err := k.e.Read(ctx, def, tc.path, tc.version)
		wantErr(t, "Read("+tc.name+")", err, tc.want)
	}
	m := k.meta(t, def, "app/db")
	want := &Metadata{Path: "app/db", CreatedTime: t0, UpdatedTime: t0.Add(time.Second), CurrentVersion: 2, OldestVersion: 1,
		Versions: []VersionMeta{v1, v2}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("Metadata:\n got %+v\nwant %+v", m, want)
	}
}

// TestWriteInvalid: bad data is refused with a clear error and nothing is
// written.
func TestWriteInvalid(t *testing.T) {
	k := newKit(t)
	big := `{"k":"` + strings.Repeat("x", MaxValueBytes) + `"}`
	for _, tc := range []struct {
		name, data string
		want       error
		says       string
	}{
		{"an array", `[1]`, ErrInvalid, "JSON object"},
		{"null", `null`, ErrInvalid, "JSON object"},
		{"a string", `"s"`, ErrInvalid, "JSON object"},
		{"nothing", ``, ErrInvalid, "ends early"},
		{"a key twice", `{"a":1,"a":2}`, ErrInvalid, `"a" appears twice`},
		{"a nested key twice", `{"a":[{"b":1,"b":2}]}`, ErrInvalid, `"b" appears twice`},
		{"trailing data", `{"a":1} {}`, ErrInvalid, "after the JSON object"},
		{"truncated", `{"a":`, ErrInvalid, "ends early"},
		{"not JSON", `{a:1}`, ErrInvalid, "not valid JSON"},
		{"not UTF-8", "{\"a\":\"\xff\"}", ErrInvalid, "not UTF-8"},
		{"a control character", "{\"a\":\"\x01\"}", ErrInvalid, "not valid JSON"},
		{"too large", big, ErrTooLarge, "over"},
	} {
		_, err := k.e.Write(ctx, def, "p", json.RawMessage(tc.data), nil)
		wantErr(t, "Write("+tc.name+")", err, tc.want)
		if err != nil && !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Write(%s): error %q does not say %q", tc.name, err, tc.says)
		}
	}
	_, err := k.e.Write(ctx, def, "a//b", json.RawMessage(`{}`), nil)
	wantErr(t, "Write(bad path)", err, ErrInvalid)
	_, err = k.e.Metadata(ctx, def, "p")
	wantErr(t, "Metadata after refused writes", err, ErrNotFound)
	// An empty object and white space are fine.
	k.write(t, def, "p", " {\n} ")
	if s := k.read(t, def, "p", 0); string(s.Data) != `{}` {
		t.Errorf("Read = %s, want {}", s.Data)
	}
}

func TestCAS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(k *kit)
		cas   *int
		want  error
	}{
		{"0 on a new path", func(*kit) {}, ptr(0), nil},
		{"1 on a new path", func(*kit) {}, ptr(1), ErrCASMismatch},
		{"0 on metadata only", func(k *kit) { must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{})) }, ptr(0), nil},
		{"0 on an existing path", func(k *kit) { k.write(t, def, "p", `{}`) }, ptr(0), ErrCASMismatch},
		{"the current version", func(k *kit) { k.write(t, def, "p", `{}`); k.write(t, def, "p", `{}`) }, ptr(2), nil},
		{"an old version", func(k *kit) { k.write(t, def, "p", `{}`); k.write(t, def, "p", `{}`) }, ptr(1), ErrCASMismatch},
		{"negative", func(*kit) {}, ptr(-1), ErrInvalid},
		{"none, required by the path", func(k *kit) {
			must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{CASRequired: ptr(true)}))
		}, nil, ErrCASRequired},
		{"given, required by the path", func(k *kit) {
			must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{CASRequired: ptr(true)}))
		}, ptr(0), nil},
		{"none, required by the mount", func(k *kit) {
			must(t, "SetConfig", k.e.SetConfig(ctx, def, MountConfig{CASRequired: true}))
		}, nil, ErrCASRequired},
		{"none, the mount's required over the path's", func(k *kit) {
			must(t, "SetConfig", k.e.SetConfig(ctx, def, MountConfig{CASRequired: true}))
			must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{CASRequired: ptr(false)}))
		}, nil, ErrCASRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKit(t)
			tc.setup(k)
			before, _ := k.e.Metadata(ctx, def, "p")
			_, err := k.e.Write(ctx, def, "p", json.RawMessage(`{"x":1}`), tc.cas)
			wantErr(t, "Write", err, tc.want)
			after, _ := k.e.Metadata(ctx, def, "p")
			if tc.want != nil && !reflect.DeepEqual(before, after) {
				t.Errorf("a refused write changed the metadata: %+v, then %+v", before, after)
			}
			// Patch checks cas the same way (on a path with a version).
			if tc.want == nil {
				cur := after.CurrentVersion
				_, err = k.e.Patch(ctx, def, "p", json.RawMessage(`{"y":2}`), ptr(cur+1))
				wantErr(t, "Patch(cas ahead)", err, ErrCASMismatch)
				_, err = k.e.Patch(ctx, def, "p", json.RawMessage(`{"y":2}`), ptr(cur))
				must(t, "Patch(cas current)", err)
			}
		})
	}
}

// erased reports whether the store holds no value for version v.
func (k *kit) erased(t testing.TB, tenant, path string, v int) bool {
	t.Helper()
	_, err := k.st.GetSecretValue(ctx, tenant, path, v)
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	return err != nil
}

func TestMaxVersions(t *testing.T) {
	for _, tc := range []struct {
		name        string
		path, mount int
		writes      int
		oldest      int
		lowerTo     int // then max_versions lowered to this, and one more write
		oldestAfter int
	}{
		{"the default", 0, 0, 12, 3, 0, 0},
		{"the path's", 3, 0, 5, 3, 0, 0},
		{"the mount's", 0, 2, 5, 4, 0, 0},
		{"the path's over the mount's", 4, 2, 6, 3, 0, 0},
		{"lowered", 5, 0, 5, 1, 2, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKit(t)
			if tc.mount > 0 {
				must(t, "SetConfig", k.e.SetConfig(ctx, def, MountConfig{MaxVersions: tc.mount}))
			}
			if tc.path > 0 {
				must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{MaxVersions: ptr(tc.path)}))
			}
			for i := range tc.writes {
				k.write(t, def, "p", fmt.Sprintf(`{"i":%d}`, i+1))
			}
			last, oldest := tc.writes, tc.oldest
			if tc.lowerTo > 0 {
				must(t, "SetMetadata(lower)", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{MaxVersions: ptr(tc.lowerTo)}))
				if m := k.meta(t, def, "p"); m.OldestVersion != tc.oldest {
					t.Errorf("lowering max_versions trimmed at once: oldest %d", m.OldestVersion)
				}
				k.write(t, def, "p", `{}`)
				last, oldest = last+1, tc.oldestAfter
			}
			m := k.meta(t, def, "p")
			if m.CurrentVersion != last || m.OldestVersion != oldest || len(m.Versions) != last-oldest+1 || m.Versions[0].Version != oldest {
				t.Errorf("current %d oldest %d, %d versions, want %d, %d, %d", m.CurrentVersion, m.OldestVersion, len(m.Versions), last, oldest, last-oldest+1)
			}
			for v := 1; v <= last; v++ {
				_, err := k.e.Read(ctx, def, "p", v)
				if v < oldest {
					wantErr(t, fmt.Sprintf("Read(v%d, trimmed)", v), err, ErrNotFound)
					if !k.erased(t, def, "p", v) {
						t.Errorf("v%d trimmed but its value is still stored", v)
					}
				} else if err != nil {
					t.Errorf("Read(v%d): %v", v, err)
				}
			}
		})
	}
}

func TestDeleteVersionAfter(t *testing.T) {
	for _, tc := range []struct {
		name        string
		path, mount time.Duration
		after       time.Duration
	}{
		{"the mount's", 0, time.Hour, time.Hour},
		{"the path's", 30 * time.Minute, 0, 30 * time.Minute},
		{"the shorter, the path's", 30 * time.Minute, time.Hour, 30 * time.Minute},
		{"the shorter, the mount's", 2 * time.Hour, time.Hour, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKit(t)
			must(t, "SetConfig", k.e.SetConfig(ctx, def, MountConfig{DeleteVersionAfter: tc.mount}))
			if tc.path > 0 {
				must(t, "SetMetadata", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{DeleteVersionAfter: ptr(tc.path)}))
			}
			vm := k.write(t, def, "p", `{"a":1}`)
			if !vm.DeletionTime.Equal(t0.Add(tc.after)) {
				t.Fatalf("deletion time %v, want %v", vm.DeletionTime, t0.Add(tc.after))
			}
			k.clock.add(tc.after - time.Microsecond)
			k.read(t, def, "p", 0)
			k.clock.add(time.Microsecond)
			_, err := k.e.Read(ctx, def, "p", 0)
			gone(t, "Read after delete_version_after", err, 1, false)
			// Undelete runs the clock again from now.
			must(t, "Undelete", k.e.Undelete(ctx, def, "p", []int{1}))
			s := k.read(t, def, "p", 1)
			if now := k.clock.now(); !s.Meta.DeletionTime.Equal(now.Add(tc.after)) {
				t.Errorf("deletion time after undelete %v, want %v", s.Meta.DeletionTime, now.Add(tc.after))
			}
		})
	}
}

func TestDeleteUndeleteDestroy(t *testing.T) {
	k := newKit(t)
	for i := range 3 {
		k.write(t, def, "p", fmt.Sprintf(`{"i":%d}`, i+1))
	}
	k.clock.add(time.Minute)
	must(t, "Delete(current)", k.e.Delete(ctx, def, "p", nil))
	g := gone(t, "Read(current, deleted)", func() error { _, err := k.e.Read(ctx, def, "p", 0); return err }(), 3, false)
	if !g.Meta.DeletionTime.Equal(t0.Add(time.Minute)) {
		t.Errorf("deletion time %v", g.Meta.DeletionTime)
	}
	k.read(t, def, "p", 2)
	// Deleting again keeps the first deletion time.
	k.clock.add(time.Minute)
	must(t, "Delete(current again)", k.e.Delete(ctx, def, "p", nil))
	if m := k.meta(t, def, "p"); !m.Versions[2].DeletionTime.Equal(t0.Add(time.Minute)) {
		t.Errorf("deletion time moved: %v", m.Versions[2].DeletionTime)
	}
	must(t, "Delete(1, 9)", k.e.Delete(ctx, def, "p", []int{1, 9}))
	_, err := k.e.Read(ctx, def, "p", 1)
	gone(t, "Read(v1, deleted)", err, 1, false)
	must(t, "Undelete(1, 3, 9)", k.e.Undelete(ctx, def, "p", []int{1, 3, 9}))
	for _, v := range []int{1, 3} {
		if s := k.read(t, def, "p", v); !s.Meta.DeletionTime.IsZero() {
			t.Errorf("v%d after undelete: %+v", v, s.Meta)
		}
	}
	must(t, "Destroy(2)", k.e.Destroy(ctx, def, "p", []int{2}))
	_, err = k.e.Read(ctx, def, "p", 2)
	gone(t, "Read(v2, destroyed)", err, 2, true)
	if !k.erased(t, def, "p", 2) {
		t.Error("v2 destroyed but its value is still stored")
	}
	must(t, "Undelete(2)", k.e.Undelete(ctx, def, "p", []int{2}))
	_, err = k.e.Read(ctx, def, "p", 2)
	gone(t, "Read(v2, destroyed, after undelete)", err, 2, true)
	must(t, "Delete(2)", k.e.Delete(ctx, def, "p", []int{2}))
	_, err = k.e.Read(ctx, def, "p", 2)
	g = gone(t, "Read(v2, destroyed, after delete)", err, 2, true)
	if !g.Meta.DeletionTime.IsZero() {
		t.Errorf("a destroyed version was deleted: %+v", g.Meta)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"Undelete(none)", k.e.Undelete(ctx, def, "p", nil), ErrInvalid},
		{"Destroy(none)", k.e.Destroy(ctx, def, "p", nil), ErrInvalid},
		{"Destroy(0)", k.e.Destroy(ctx, def, "p", []int{0}), ErrInvalid},
		{"Delete(-1)", k.e.Delete(ctx, def, "p", []int{-1}), ErrInvalid},
		{"Delete(no such path)", k.e.Delete(ctx, def, "nope", nil), nil},
		{"Undelete(no such path)", k.e.Undelete(ctx, def, "nope", []int{1}), nil},
		{"Destroy(no such path)", k.e.Destroy(ctx, def, "nope", []int{1}), nil},
		{"Delete(bad path)", k.e.Delete(ctx, def, "/p", nil), ErrInvalid},
	} {
		if tc.want == nil {
			must(t, tc.name, tc.err)
		} else {
			wantErr(t, tc.name, tc.err, tc.want)
		}
	}
	if _, err := k.e.Metadata(ctx, def, "nope"); err == nil {
		t.Error("a delete of a path that does not exist made it")
	}
	// Metadata only: nothing to delete.
	must(t, "SetMetadata(q)", k.e.SetMetadata(ctx, def, "q", MetadataUpdate{}))
	must(t, "Delete(metadata only)", k.e.Delete(ctx, def, "q", nil))
}

func TestPatch(t *testing.T) {
	k := newKit(t)
	k.write(t, def, "p", `{"a":1,"b":{"c":2,"d":3},"e":[1,2]}`)
	vm, err := k.e.Patch(ctx, def, "p", json.RawMessage(`{"b":{"c":null,"x":4},"e":{"f":true},"g":"<&>"}`), nil)
	must(t, "Patch", err)
	if vm.Version != 2 {
		t.Errorf("Patch made version %d", vm.Version)
	}
	if s := k.read(t, def, "p", 0); string(s.Data) != `{"a":1,"b":{"d":3,"x":4},"e":{"f":true},"g":"<&>"}` {
		t.Errorf("patched: %s", s.Data)
	}
	if s := k.read(t, def, "p", 1); string(s.Data) != `{"a":1,"b":{"c":2,"d":3},"e":[1,2]}` {
		t.Errorf("v1 after the patch: %s", s.Data)
	}
	_, err = k.e.Patch(ctx, def, "nope", json.RawMessage(`{}`), nil)
	wantErr(t, "Patch(no such path)", err, ErrNotFound)
	must(t, "SetMetadata(q)", k.e.SetMetadata(ctx, def, "q", MetadataUpdate{}))
	_, err = k.e.Patch(ctx, def, "q", json.RawMessage(`{}`), nil)
	wantErr(t, "Patch(metadata only)", err, ErrNotFound)
	_, err = k.e.Patch(ctx, def, "p", json.RawMessage(`[1]`), nil)
	wantErr(t, "Patch(an array)", err, ErrInvalid)
	_, err = k.e.Patch(ctx, def, "p", json.RawMessage(`{"a":1,"a":2}`), nil)
	wantErr(t, "Patch(a key twice)", err, ErrInvalid)
	must(t, "Delete", k.e.Delete(ctx, def, "p", nil))
	_, err = k.e.Patch(ctx, def, "p", json.RawMessage(`{"a":2}`), nil)
	gone(t, "Patch(deleted)", err, 2, false)
	must(t, "Destroy", k.e.Destroy(ctx, def, "p", []int{2}))
	_, err = k.e.Patch(ctx, def, "p", json.RawMessage(`{"a":2}`), nil)
	gone(t, "Patch(destroyed)", err, 2, true)
	// A patch that grows the data past the limit.
	k.write(t, def, "big", `{"a":"`+strings.Repeat("x", MaxValueBytes/2)+`"}`)
	_, err = k.e.Patch(ctx, def, "big", json.RawMessage(`{"b":"`+strings.Repeat("y", MaxValueBytes/2)+`"}`), nil)
	wantErr(t, "Patch(too large)", err, ErrTooLarge)
}

func TestSubkeys(t *testing.T) {
	k := newKit(t)
	k.write(t, def, "p", `{"a":1,"b":{"c":{"d":2},"e":"s"},"f":[{"g":1}],"h":{}}`)
	for _, tc := range []struct {
		depth int
		want  string
	}{
		{0, `{"a":null,"b":{"c":{"d":null},"e":null},"f":null,"h":{}}`},
		{1, `{"a":null,"b":null,"f":null,"h":null}`},
		{2, `{"a":null,"b":{"c":null,"e":null},"f":null,"h":{}}`},
		{3, `{"a":null,"b":{"c":{"d":null},"e":null},"f":null,"h":{}}`},
	} {
		got, vm, err := k.e.Subkeys(ctx, def, "p", 0, tc.depth)
		must(t, fmt.Sprintf("Subkeys(depth %d)", tc.depth), err)
		if string(got) != tc.want || vm.Version != 1 {
			t.Errorf("Subkeys(depth %d) = %s v%d, want %s", tc.depth, got, vm.Version, tc.want)
		}
	}
	_, _, err := k.e.Subkeys(ctx, def, "p", 0, -1)
	wantErr(t, "Subkeys(depth -1)", err, ErrInvalid)
	_, _, err = k.e.Subkeys(ctx, def, "p", 2, 0)
	wantErr(t, "Subkeys(v2)", err, ErrNotFound)
	must(t, "Delete", k.e.Delete(ctx, def, "p", nil))
	_, _, err = k.e.Subkeys(ctx, def, "p", 0, 0)
	gone(t, "Subkeys(deleted)", err, 1, false)
}

func TestMetadata(t *testing.T) {
	k := newKit(t)
	must(t, "SetMetadata(new)", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{
		MaxVersions: ptr(5), CASRequired: ptr(true), DeleteVersionAfter: ptr(time.Hour),
		CustomMetadata: map[string]string{"owner": "team-a", "env": "prod"},
	}))
	want := &Metadata{Path: "p", CASRequired: true, MaxVersions: 5, DeleteVersionAfter: time.Hour,
		CustomMetadata: map[string]string{"owner": "team-a", "env": "prod"}, CreatedTime: t0, UpdatedTime: t0}
	if m := k.meta(t, def, "p"); !reflect.DeepEqual(m, want) {
		t.Errorf("Metadata(new):\n got %+v\nwant %+v", m, want)
	}
	_, err := k.e.Read(ctx, def, "p", 0)
	wantErr(t, "Read(metadata only)", err, ErrNotFound)

	// A nil field is left; custom metadata is replaced whole.
	k.clock.add(time.Second)
	must(t, "SetMetadata(replace)", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{CustomMetadata: map[string]string{"owner": "team-b"}}))
	want.CustomMetadata, want.UpdatedTime = map[string]string{"owner": "team-b"}, t0.Add(time.Second)
	if m := k.meta(t, def, "p"); !reflect.DeepEqual(m, want) {
		t.Errorf("Metadata(replaced):\n got %+v\nwant %+v", m, want)
	}
	// PatchMetadata merges, "" removes.
	must(t, "PatchMetadata", k.e.PatchMetadata(ctx, def, "p", MetadataUpdate{MaxVersions: ptr(0),
		CustomMetadata: map[string]string{"owner": "", "tier": "1"}}))
	want.CustomMetadata, want.MaxVersions = map[string]string{"tier": "1"}, 0
	if m := k.meta(t, def, "p"); !reflect.DeepEqual(m, want) {
		t.Errorf("Metadata(patched):\n got %+v\nwant %+v", m, want)
	}
	// Reads carry the custom metadata.
	_, err = k.e.Write(ctx, def, "p", json.RawMessage(`{"a":1}`), nil)
	wantErr(t, "Write(no cas, cas_required)", err, ErrCASRequired)
	_, err = k.e.Write(ctx, def, "p", json.RawMessage(`{"a":1}`), ptr(0))
	must(t, "Write(cas 0)", err)
	if s := k.read(t, def, "p", 0); !reflect.DeepEqual(s.CustomMetadata, map[string]string{"tier": "1"}) {
		t.Errorf("Read's custom metadata: %v", s.CustomMetadata)
	}
	// The empty map clears.
	must(t, "SetMetadata(clear)", k.e.SetMetadata(ctx, def, "p", MetadataUpdate{CustomMetadata: map[string]string{}}))
	if s := k.read(t, def, "p", 0); s.CustomMetadata != nil {
		t.Errorf("custom metadata after clearing: %v", s.CustomMetadata)
	}

	err = k.e.PatchMetadata(ctx, def, "nope", MetadataUpdate{})
	wantErr(t, "PatchMetadata(no such path)", err, ErrNotFound)
	_, err = k.e.Metadata(ctx, def, "nope")
	wantErr(t, "Metadata(no such path)", err, ErrNotFound)

	many := map[string]string{}
	for i := range MaxCustomMetadata + 1 {
		many[fmt.Sprint("k", i)] = "v"
	}
	for _, tc := range []struct {
		name string
		u    MetadataUpdate
		want error
	}{
		{"too many keys", MetadataUpdate{CustomMetadata: many}, ErrInvalid},
		{"a long key", MetadataUpdate{CustomMetadata: map[string]string{strings.Repeat("k", MaxCustomKeyBytes+1): "v"}}, ErrInvalid},
		{"a long value", MetadataUpdate{CustomMetadata: map[string]string{"k": strings.Repeat("v", MaxCustomValueByte+1)}}, ErrInvalid},
		{"an empty value", MetadataUpdate{CustomMetadata: map[string]string{"k": ""}}, ErrInvalid},
		{"an empty key", MetadataUpdate{CustomMetadata: map[string]string{"": "v"}}, ErrInvalid},
		{"an unprintable key", MetadataUpdate{CustomMetadata: map[string]string{"k\n": "v"}}, ErrInvalid},
		{"an unprintable value", MetadataUpdate{CustomMetadata: map[string]string{"k": "v\x00"}}, ErrInvalid},
		{"negative max_versions", MetadataUpdate{MaxVersions: ptr(-1)}, ErrInvalid},
		{"negative delete_version_after", MetadataUpdate{DeleteVersionAfter: ptr(-time.Second)}, ErrInvalid},
	} {
		wantErr(t, "SetMetadata("+tc.name+")", k.e.SetMetadata(ctx, def, "q", tc.u), tc.want)
	}
	_, err = k.e.Metadata(ctx, def, "q")
	wantErr(t, "Metadata after refused SetMetadata", err, ErrNotFound)
	// At the limits is fine.
	at := map[string]string{strings.Repeat("k", MaxCustomKeyBytes): strings.Repeat("é", MaxCustomValueByte/2)}
	must(t, "SetMetadata(at the limits)", k.e.SetMetadata(ctx, def, "q", MetadataUpdate{CustomMetadata: at}))

	// DeleteMetadata erases every version.
	must(t, "DeleteMetadata", k.e.DeleteMetadata(ctx, def, "p"))
	_, err = k.e.Metadata(ctx, def, "p")
	wantErr(t, "Metadata after DeleteMetadata", err, ErrNotFound)
	if !k.erased(t, def, "p", 1) {
		t.Error("a value outlived DeleteMetadata")
	}
	must(t, "DeleteMetadata(no such path)", k.e.DeleteMetadata(ctx, def, "p"))
	wantErr(t, "DeleteMetadata(bad path)", k.e.DeleteMetadata(ctx, def, "a/./b"), ErrInvalid)
	// The path starts again from version 1.
	if vm := k.write(t, def, "p", `{}`); vm.Version != 1 {
		t.Errorf("after DeleteMetadata, Write made version %d", vm.Version)
	}
}

func TestList(t *testing.T) {
	k := newKit(t)
	for _, p := range []string{"a", "a/b", "a/c/d", "a/c/e", "a-b", "b/x/y", "c", "a/c/f/g", "é/x", "a%/x", "a_"} {
		k.write(t, def, p, `{}`)
	}
	must(t, "SetMetadata(m/only)", k.e.SetMetadata(ctx, def, "m/only", MetadataUpdate{}))
	must(t, "Delete(c)", k.e.Delete(ctx, def, "c", nil))
	cases := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a", "a%/", "a-b", "a/", "a_", "b/", "c", "m/", "é/"}},
		{"a/", []string{"b", "c/"}},
		{"a/c/", []string{"d", "e", "f/"}},
		{"b/", []string{"x/"}},
		{"a%/", []string{"x"}},
		{"m/", []string{"only"}},
	}
	for _, page := range []int{1000, 1, 2, 3} {
		listPage = page
		for _, tc := range cases {
			got, err := k.e.List(ctx, def, tc.prefix)
			must(t, fmt.Sprintf("List(%q), pages of %d", tc.prefix, page), err)
			if !slices.Equal(got, tc.want) {
				t.Errorf("List(%q), pages of %d = %q, want %q", tc.prefix, page, got, tc.want)
			}
		}
	}
	listPage = 1000
	for _, tc := range []struct {
		prefix string
		want   error
	}{
		{"z/", ErrNotFound},
		{"a/b/", ErrNotFound},
		{"a_/", ErrNotFound},
		{"a", ErrInvalid},
		{"/", ErrInvalid},
		{"a//", ErrInvalid},
	} {
		_, err := k.e.List(ctx, def, tc.prefix)
		wantErr(t, fmt.Sprintf("List(%q)", tc.prefix), err, tc.want)
	}
}

func TestConfig(t *testing.T) {
	k := newKit(t)
	c, err := k.e.Config(ctx, def)
	must(t, "Config(none set)", err)
	if c != (MountConfig{}) {
		t.Errorf("Config(none set) = %+v", c)
	}
	want := MountConfig{MaxVersions: 3, CASRequired: true, DeleteVersionAfter: 90 * time.Second}
	must(t, "SetConfig", k.e.SetConfig(ctx, def, want))
	if c, err := k.e.Config(ctx, def); err != nil || c != want {
		t.Errorf("Config = %+v, %v; want %+v", c, err, want)
	}
	wantErr(t, "SetConfig(negative max_versions)", k.e.SetConfig(ctx, def, MountConfig{MaxVersions: -1}), ErrInvalid)
	wantErr(t, "SetConfig(negative delete_version_after)", k.e.SetConfig(ctx, def, MountConfig{DeleteVersionAfter: -1}), ErrInvalid)
	wantErr(t, "SetConfig(no such tenant)", k.e.SetConfig(ctx, "nope", want), ErrNotFound)
	_, err = k.e.Config(ctx, "nope")
	wantErr(t, "Config(no such tenant)", err, ErrNotFound)
}

// TestTenants: nothing of one tenant is found, listed or changed under
// another's name.
func TestTenants(t *testing.T) {
	k := newKit(t)
	k.tenant(t, "acme")
	k.write(t, "acme", "shared", `{"owner":"acme"}`)
	k.write(t, "acme", "dir/only-acme", `{}`)
	k.write(t, def, "shared", `{"owner":"default"}`)
	must(t, "SetConfig(acme)", k.e.SetConfig(ctx, "acme", MountConfig{MaxVersions: 1}))

	if s := k.read(t, "acme", "shared", 0); string(s.Data) != `{"owner":"acme"}` {
		t.Errorf("acme reads %s", s.Data)
	}
	if s := k.read(t, def, "shared", 0); string(s.Data) != `{"owner":"default"}` {
		t.Errorf("default reads %s", s.Data)
	}
	_, err := k.e.Read(ctx, def, "dir/only-acme", 0)
	wantErr(t, "Read(default, acme's path)", err, ErrNotFound)
	_, err = k.e.List(ctx, def, "dir/")
	wantErr(t, "List(default, acme's folder)", err, ErrNotFound)
	if c, _ := k.e.Config(ctx, def); c.MaxVersions != 0 {
		t.Errorf("default has acme's config: %+v", c)
	}
	must(t, "Destroy(default, dir/only-acme)", k.e.Destroy(ctx, def, "dir/only-acme", []int{1}))
	must(t, "DeleteMetadata(default, dir/only-acme)", k.e.DeleteMetadata(ctx, def, "dir/only-acme"))
	k.read(t, "acme", "dir/only-acme", 1)
	for _, tn := range []string{"nope", "Bad Name"} {
		_, err = k.e.Read(ctx, tn, "shared", 0)
		wantErr(t, "Read(tenant "+tn+")", err, ErrNotFound)
		_, err = k.e.Write(ctx, tn, "shared", json.RawMessage(`{}`), nil)
		wantErr(t, "Write(tenant "+tn+")", err, ErrNotFound)
		_, err = k.e.List(ctx, tn, "")
		wantErr(t, "List(tenant "+tn+")", err, ErrNotFound)
	}
	// A tenant with secrets is not deleted.
	wantErr(t, "DeleteTenant(acme)", k.st.DeleteTenant(ctx, "acme"), store.ErrNotEmpty)
}

// keygate's own records (TOTP keys, password policies) sit beside a
// tenant's secrets: only the Internal view reaches or lists them, and the
// mount's cas_required does not apply to them.
func TestInternalRecords(t *testing.T) {
	ctx := context.Background()
	k := newKit(t)
	in := k.e.Internal()
	if err := k.e.SetConfig(ctx, def, MountConfig{CASRequired: true}); err != nil {
		t.Fatal(err)
	}
	defer func(n int) { listPage = n }(listPage)
	listPage = 2 // pages of internal records the user's list must get past
	for _, p := range []string{"@totp/a", "@totp/b", "@totp/c", "@password-policy/x"} {
		if _, err := in.Write(ctx, def, p, json.RawMessage(`{"k":"v"}`), nil); err != nil {
			t.Fatalf("internal write %s: %v", p, err)
		}
	}
	zero := 0
	if _, err := k.e.Write(ctx, def, "app", json.RawMessage(`{"a":1}`), &zero); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"read", func() error { _, err := k.e.Read(ctx, def, "@totp/a", 0); return err }()},
		{"write", func() error { _, err := k.e.Write(ctx, def, "@totp/a", json.RawMessage(`{}`), nil); return err }()},
		{"metadata", func() error { _, err := k.e.Metadata(ctx, def, "@totp/a"); return err }()},
		{"list", func() error { _, err := k.e.List(ctx, def, "@totp/"); return err }()},
		{"internal view, a user's path", func() error { _, err := in.Read(ctx, def, "app", 0); return err }()},
	} {
		if !errors.Is(c.err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, c.err)
		}
	}
	if names, err := k.e.List(ctx, def, ""); err != nil || !slices.Equal(names, []string{"app"}) {
		t.Errorf("the user's list: %v, %v", names, err)
	}
	if names, err := in.List(ctx, def, "@totp/"); err != nil || !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("the internal list: %v, %v", names, err)
	}
}
