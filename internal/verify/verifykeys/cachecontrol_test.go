package verifykeys

import (
	"net/http"
	"testing"
	"time"
)

func TestParseCacheControl(t *testing.T) {
	t.Parallel()
	const maxDelta = maxDeltaSeconds * time.Second
	for _, tt := range []struct {
		in   string
		want cacheControl
	}{
		{"", cacheControl{}},
		{"max-age=300", cacheControl{maxAge: 300 * time.Second, hasMaxAge: true}},
		{"MAX-AGE=300", cacheControl{maxAge: 300 * time.Second, hasMaxAge: true}},
		{"public, max-age=60, must-revalidate", cacheControl{maxAge: time.Minute, hasMaxAge: true}},
		{`max-age="60"`, cacheControl{maxAge: time.Minute, hasMaxAge: true}},
		{" \tmax-age=60 ", cacheControl{maxAge: time.Minute, hasMaxAge: true}},
		{",,, ,max-age=3,,", cacheControl{maxAge: 3 * time.Second, hasMaxAge: true}},
		{"max-age=10, max-age=20", cacheControl{maxAge: 10 * time.Second, hasMaxAge: true}},
		{"max-age=-1", cacheControl{hasMaxAge: true}},
		{"max-age=1e3", cacheControl{hasMaxAge: true}},
		{"max-age=abc", cacheControl{hasMaxAge: true}},
		{"max-age=", cacheControl{hasMaxAge: true}},
		{"max-age", cacheControl{hasMaxAge: true}},
		{`max-age="`, cacheControl{hasMaxAge: true}},
		{"max-age=2147483648", cacheControl{maxAge: maxDelta, hasMaxAge: true}},
		{"max-age=99999999999999999999999999", cacheControl{maxAge: maxDelta, hasMaxAge: true}},
		{"s-maxage=100", cacheControl{}},
		{"max-agex=100", cacheControl{}},
		{"no-store", cacheControl{noStore: true}},
		{"No-Cache", cacheControl{noCache: true}},
		{"no-cache, max-age=5", cacheControl{maxAge: 5 * time.Second, hasMaxAge: true, noCache: true}},
		{`no-cache="Set-Cookie, X-Foo", max-age=5`, cacheControl{maxAge: 5 * time.Second, hasMaxAge: true}},
		{`private="a,b", max-age=7`, cacheControl{maxAge: 7 * time.Second, hasMaxAge: true}},
		{`foo="a\"b, max-age=1", max-age=9`, cacheControl{maxAge: 9 * time.Second, hasMaxAge: true}},
		{`foo="unterminated, max-age=5`, cacheControl{}},
		{`foo=bar\`, cacheControl{}},
		{`"\`, cacheControl{}},
	} {
		if got := parseCacheControl(tt.in); got != tt.want {
			t.Errorf("parseCacheControl(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestRefreshInterval(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	date := func(t time.Time) string { return t.Format(http.TimeFormat) }
	const lo, hi, def = 10 * time.Second, time.Hour, 5 * time.Minute
	for _, tt := range []struct {
		name   string
		header []string // name, value pairs; a name may repeat
		want   time.Duration
	}{
		{"nothing", nil, def},
		{"max-age", []string{"Cache-Control", "max-age=300"}, 300 * time.Second},
		{"max-age under the minimum", []string{"Cache-Control", "max-age=1"}, lo},
		{"max-age=0", []string{"Cache-Control", "max-age=0"}, lo},
		{"max-age over the maximum", []string{"Cache-Control", "max-age=86400"}, hi},
		{"huge max-age", []string{"Cache-Control", "max-age=99999999999999999999"}, hi},
		{"invalid max-age", []string{"Cache-Control", "max-age=soon"}, lo},
		{"no-store", []string{"Cache-Control", "no-store, max-age=600"}, lo},
		{"no-cache", []string{"Cache-Control", "no-cache"}, lo},
		{"other directives only", []string{"Cache-Control", "public, must-revalidate"}, def},
		{"two field lines", []string{"Cache-Control", "public", "Cache-Control", "max-age=600"}, 600 * time.Second},
		{"Age subtracted", []string{"Cache-Control", "max-age=300", "Age", "100"}, 200 * time.Second},
		{"Age beyond max-age", []string{"Cache-Control", "max-age=300", "Age", "1000"}, lo},
		{"invalid Age ignored", []string{"Cache-Control", "max-age=300", "Age", "-5"}, 300 * time.Second},
		{"Expires without Date", []string{"Expires", date(now.Add(30 * time.Minute))}, 30 * time.Minute},
		{"Expires minus Date", []string{"Date", date(now.Add(-24 * time.Hour)), "Expires", date(now.Add(-24*time.Hour + 20*time.Minute))}, 20 * time.Minute},
		{"Expires with Age", []string{"Expires", date(now.Add(30 * time.Minute)), "Age", "600"}, 20 * time.Minute},
		{"Expires in the past", []string{"Expires", date(now.Add(-time.Hour))}, lo},
		{"invalid Expires", []string{"Expires", "0"}, lo},
		{"max-age wins over Expires", []string{"Cache-Control", "max-age=120", "Expires", date(now.Add(30 * time.Minute))}, 120 * time.Second},
		{"extreme dates", []string{"Date", "Fri, 31 Dec 9999 23:59:59 GMT", "Expires", "Mon, 01 Jan 0001 00:00:00 GMT", "Age", "100"}, lo},
		{"extreme dates reversed", []string{"Date", "Mon, 01 Jan 0001 00:00:00 GMT", "Expires", "Fri, 31 Dec 9999 23:59:59 GMT"}, hi},
	} {
		h := http.Header{}
		for i := 0; i+1 < len(tt.header); i += 2 {
			h.Add(tt.header[i], tt.header[i+1])
		}
		if got := refreshInterval(h, now, lo, hi, def); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func FuzzCacheControl(f *testing.F) {
	for _, s := range []string{
		"", "max-age=300", `no-cache="a, b", max-age=5`, `foo="\`, "max-age=99999999999999999999",
		"no-store", ",,,", `"`, "max-age=-0", "MAX-AGE = 1",
	} {
		f.Add(s)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		cc := parseCacheControl(s)
		if cc.maxAge < 0 || cc.maxAge > maxDeltaSeconds*time.Second || (!cc.hasMaxAge && cc.maxAge != 0) {
			t.Fatalf("parseCacheControl(%q) = %+v", s, cc)
		}
		h := http.Header{"Cache-Control": {s}, "Expires": {s}, "Age": {s}, "Date": {s}}
		if d := refreshInterval(h, now, time.Second, time.Hour, time.Minute); d < time.Second || d > time.Hour {
			t.Fatalf("refreshInterval with %q = %v", s, d)
		}
		delete(h, "Cache-Control")
		if d := refreshInterval(h, now, time.Second, time.Hour, time.Minute); d < time.Second || d > time.Hour {
			t.Fatalf("refreshInterval with Expires %q = %v", s, d)
		}
	})
}
