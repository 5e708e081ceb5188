package verify

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestAllocations asserts that a cache hit allocates nothing, with a
// revocation checker holding entries and a policy mapping headers.
func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	e := newEnv(t, func(c *Config) {
		c.Policies[0].Headers = []HeaderMapping{{"X-User", "sub"}, {"X-Scope", "scope"}}
	})
	for i := range 100 {
		e.rev.RevokeID(issA, fmt.Sprint("other-", i), t0.Add(time.Hour))
		e.rev.RevokeSubject(issA, fmt.Sprint("someone-", i), t0)
	}
	ctx := context.Background()
	tok := mint(t, e.a, e.aClaims)
	if _, err := e.p.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := e.p.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a cache hit allocates %v times, want 0", allocs)
	}
	// Refusing an oversized token allocates nothing either.
	big := string(make([]byte, 10000))
	if a := testing.AllocsPerRun(100, func() { e.p.Verify(ctx, big) }); a != 0 {
		t.Errorf("refusing an oversized token allocates %v times", a)
	}
}
