package secrets

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// FuzzNotice: a change notice's payload never panics the parser or the
// handler; a malformed one is counted and drops nothing, and a well-formed
// one (the tenant, a NUL, the path, neither empty) drops that path's entry
// and no other.
func FuzzNotice(f *testing.F) {
	for _, s := range []string{"default\x00app/db", "t\x00p", "default\x00", "\x00app/db", "\x00", "", "no separator",
		"default\x00app\x00db", "default\x00\x00", "\x00\x00", "ten\xffant\x00pa\xfeth", "default\x00other"} {
		f.Add(s)
	}
	// Entries the cache holds before each notice; "default"/"app/db" and
	// "t"/"p" are what two seeds name.
	held := []pathID{{"default", "app/db"}, {"default", "other"}, {"t", "p"}, {"t2", "p"}, {"default", "app"}}
	f.Fuzz(func(t *testing.T, payload string) {
		e := &Engine{cache: newReadCache(1<<20, time.Minute), log: slog.New(slog.DiscardHandler)}
		id, ok := parseNotice(payload)
		if ok {
			if id.tenant == "" || id.path == "" || strings.Contains(id.tenant, "\x00") || id.tenant+"\x00"+id.path != payload {
				t.Fatalf("parseNotice(%q) = %+v, which does not make the payload back", payload, id)
			}
		} else if tenant, path, cut := strings.Cut(payload, "\x00"); cut && tenant != "" && path != "" {
			t.Fatalf("parseNotice(%q) refused a well-formed payload (tenant %q, path %q)", payload, tenant, path)
		}
		keys := append([]pathID{}, held...)
		if ok {
			keys = append(keys, id) // a repeat of a held one is the same entry
		}
		now := time.Now()
		for _, k := range keys {
			e.cache.put(k, &pathEntry{rev: 1, loaded: now, size: 1}, e.cache.mark(k))
		}
		before := e.cache.stats()

		e.notice(ctx, payload)

		after := e.cache.stats()
		wantMalformed, wantDrops := before.NoticesMalformed, before.Drops+1
		if !ok {
			wantMalformed, wantDrops = before.NoticesMalformed+1, before.Drops
		}
		if after.NoticesMalformed != wantMalformed || after.Drops != wantDrops {
			t.Fatalf("notice %q (well-formed: %v): malformed %d→%d, drops %d→%d", payload, ok,
				before.NoticesMalformed, after.NoticesMalformed, before.Drops, after.Drops)
		}
		for _, k := range keys {
			got := e.cache.get(k, now) != nil
			if want := !ok || k != id; got != want {
				t.Errorf("notice %q: entry %+v held %v after it, want %v", payload, k, got, want)
			}
		}
	})
}
