// Package ratelimit decides whether one more request under a key (a client,
// a user, an address) may proceed now, at a configured rate with a burst.
// [Local] keeps its buckets in this process, in bounded memory and without
// allocating in the steady state; [Redis] keeps them in Redis, so that a
// fleet of nodes shares one limit, and falls back to a local bucket when
// Redis does not answer.
//
// # Semantics
//
// Both limiters implement the same generic cell rate algorithm (GCRA), the
// virtual-scheduling form of a token bucket: a key may make Burst requests
// at once and one more every 1/Rate seconds after, and a denied request
// costs nothing. A denial comes with the wait after which one request would
// pass. Because the two agree to the nanosecond on what a bucket is, a
// fallback from Redis to Local changes who counts, never the rule.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Limiter decides whether a request under key may proceed now. When it may
// not, retryAfter is how long until one would. err is not nil only when no
// decision could be made at all; ok is then false.
type Limiter interface {
	Allow(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error)
}

// Limit is a rate with a burst: Burst requests may pass at once, and one
// more every 1/Rate seconds after.
type Limit struct {
	Rate  float64 // requests per second, refilled continuously
	Burst int     // requests that may pass at once; at least 1
}

// ErrInvalidLimit: a Limit with a rate or burst that is not positive.
var ErrInvalidLimit = errors.New("invalid rate limit")

// Validate reports whether the limit can be enforced.
func (l Limit) Validate() error {
	if !(l.Rate > 0) || math.IsInf(l.Rate, 0) || l.Burst < 1 {
		return fmt.Errorf("%w: rate %v/s, burst %d", ErrInvalidLimit, l.Rate, l.Burst)
	}
	if l.Rate > 1e6 {
		return fmt.Errorf("%w: rate %v/s is over 1,000,000/s", ErrInvalidLimit, l.Rate)
	}
	if float64(l.Burst)/l.Rate > float64(365*24*time.Hour/time.Second) {
		return fmt.Errorf("%w: burst %d takes over a year to refill at %v/s", ErrInvalidLimit, l.Burst, l.Rate)
	}
	return nil
}

// interval is the emission interval T = 1/Rate, and tolerance τ = Burst·T:
// a request is allowed when the bucket's theoretical arrival time after it
// would be no more than τ ahead of now.
func (l Limit) interval() (t, tau time.Duration) {
	t = max(time.Duration(float64(time.Second)/l.Rate), time.Microsecond)
	return t, t * time.Duration(l.Burst)
}
