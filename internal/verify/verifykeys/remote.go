package verifykeys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/keygate/keygate/internal/telemetry"
	"github.com/keygate/keygate/jose"
)

// RemoteConfig configures a Remote. Zero values take the defaults given.
type RemoteConfig struct {
	// URL is the JWKS document's address: https, or http to a loopback host.
	URL string
	// Client makes the requests. The default has bounded dial, TLS handshake
	// and response header waits, and follows at most five redirects that
	// stay on https.
	Client *http.Client
	// Algorithms, when not empty, is the only algorithms whose keys are
	// kept. Each key is bound to one algorithm: its "alg", or the one its
	// type and curve imply (see jose.ParsePublicKeySet).
	Algorithms []jose.Alg

	// MinRefresh and MaxRefresh bound the refresh interval the response's
	// Cache-Control max-age or Expires asks for (defaults 10 s and 24 h).
	// no-store and no-cache mean MinRefresh.
	MinRefresh time.Duration
	MaxRefresh time.Duration
	// DefaultRefresh is the interval when the response gives none
	// (default 5 min; clamped to [MinRefresh, MaxRefresh]).
	DefaultRefresh time.Duration
	// MaxStale is how long the last good set keeps serving past its refresh
	// time while fetches fail (default 24 h). After that Current returns an
	// empty set: the source fails closed.
	MaxStale time.Duration
	// Timeout bounds each fetch, body included (default 5 s).
	Timeout time.Duration
	// MaxBody caps the JWKS document (default 1 MiB); a larger one is a
	// failed fetch.
	MaxBody int64
	// RefetchInterval is the least time between two fetches that Refetch
	// starts (default 10 s).
	RefetchInterval time.Duration

	// Logger receives fetch failures at Warn, key changes at Info and
	// routine refreshes at Debug (default slog.Default()). The source adds
	// no issuer attribute of its own: scope the logger with one
	// (Logger.With("issuer", ...)), so that a line names it once.
	Logger *slog.Logger
	// Now is the clock for key ages, staleness and the Refetch rate limit
	// (default time.Now). Refresh timers run on real time.
	Now func() time.Time
	// OnFetch, if set, is called after every fetch, from the fetching
	// goroutine; it must not block.
	OnFetch func(FetchEvent)
	// Tracer, if set, traces each fetch (keygate.jwks.fetch) with its
	// result and key count.
	Tracer *telemetry.Tracer
}

// Defaults of RemoteConfig.
const (
	defaultMinRefresh      = 10 * time.Second
	defaultMaxRefresh      = 24 * time.Hour
	defaultRefresh         = 5 * time.Minute
	defaultMaxStale        = 24 * time.Hour
	defaultTimeout         = 5 * time.Second
	defaultMaxBody         = 1 << 20
	defaultRefetchInterval = 10 * time.Second
)

// FetchEvent reports one fetch to metrics: every JWKS fetch, and every
// failed discovery (Discovery set). A successful discovery is no event of
// its own; the JWKS fetch that follows it is.
type FetchEvent struct {
	URL       string        // the URL fetched, with any password redacted
	Discovery bool          // a failed fetch of the discovery document, not the JWKS
	Result    string        // ResultOK or the FetchError's Result
	Duration  time.Duration // time the fetch took
	Keys      int           // keys in the new set when a JWKS fetch succeeded
	At        time.Time     // when the fetch ended, by RemoteConfig.Now
	// Skipped are the keys of the fetched JWKS that were left out, and
	// that the previous fetch had not already left out for the same
	// reason: a key skipped by every refresh of an unchanged JWKS is
	// reported once.
	Skipped []jose.SkippedKey
}

// Remote is a key set fetched from a JWKS URL and refreshed in the
// background (see the package documentation for its guarantees). Create it
// with NewRemote or NewDiscovered, call Start, and Close it when done.
type Remote struct {
	cfg       RemoteConfig
	log       *slog.Logger
	issuer    string // for a discovered source
	spanIss   string // the issuer the fetch spans name (Open sets it)
	ownClient bool   // cfg.Client was made here, and is closed with r

	snap atomic.Pointer[snapshot]

	ctx       context.Context // the source's life; cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the refresh loop and the fetches in flight
	resched   chan struct{}  // a fetch the loop did not start has finished
	first     chan struct{}  // closed after the first JWKS fetch
	firstOnce sync.Once
	firstErr  error // that fetch's error; written before first is closed

	// skipped are the keys the last parsed JWKS left out, so that each is
	// logged and reported once. Only attempt touches it, one at a time.
	skipped map[skipID]bool

	mu            sync.Mutex // guards what follows
	url           string     // the JWKS URL, empty until discovered
	started       bool
	closed        bool
	inflight      *call
	lastRefetch   time.Time
	failures      int           // consecutive failed fetches
	urlFailures   int           // consecutive failed JWKS fetches from a discovered url
	wait          time.Duration // until the next scheduled fetch, from the last one
	interval      time.Duration // refresh interval of the current set
	status        Status
	expiredLogged bool
}

// snapshot is one published key set and the moment it stops serving.
type snapshot struct {
	set     *jose.KeySet
	expires time.Time
}

// call is one fetch in flight; done is closed when it ends.
type call struct {
	done     chan struct{}
	fromLoop bool
}

// NewRemote returns a source for the JWKS at cfg.URL. It fetches nothing
// until Start or Refetch.
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	if cfg.URL == "" {
		return nil, errors.New("no JWKS URL")
	}
	return newRemote(cfg, "")
}

// WithDefaults returns cfg with each zero bound (the refresh intervals,
// MaxStale, Timeout, RefetchInterval, MaxBody) set to its default.
func (cfg RemoteConfig) WithDefaults() RemoteConfig {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&cfg.MinRefresh, defaultMinRefresh}, {&cfg.MaxRefresh, defaultMaxRefresh}, {&cfg.DefaultRefresh, defaultRefresh},
		{&cfg.MaxStale, defaultMaxStale}, {&cfg.Timeout, defaultTimeout}, {&cfg.RefetchInterval, defaultRefetchInterval},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = defaultMaxBody
	}
	return cfg
}

func newRemote(cfg RemoteConfig, issuer string) (*Remote, error) {
	if cfg.URL != "" {
		if _, err := CheckURL(cfg.URL); err != nil {
			return nil, fmt.Errorf("JWKS URL: %w", err)
		}
	}
	for name, v := range map[string]time.Duration{"MinRefresh": cfg.MinRefresh, "MaxRefresh": cfg.MaxRefresh,
		"DefaultRefresh": cfg.DefaultRefresh, "MaxStale": cfg.MaxStale, "Timeout": cfg.Timeout, "RefetchInterval": cfg.RefetchInterval} {
		if v < 0 {
			return nil, fmt.Errorf("RemoteConfig.%s is negative", name)
		}
	}
	if cfg.MaxBody < 0 {
		return nil, errors.New("RemoteConfig.MaxBody is negative")
	}
	cfg = cfg.WithDefaults()
	if cfg.MinRefresh > cfg.MaxRefresh {
		return nil, fmt.Errorf("RemoteConfig.MinRefresh %v exceeds MaxRefresh %v", cfg.MinRefresh, cfg.MaxRefresh)
	}
	cfg.DefaultRefresh = min(max(cfg.DefaultRefresh, cfg.MinRefresh), cfg.MaxRefresh)
	cfg.Algorithms = slices.Clone(cfg.Algorithms)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Remote{
		cfg:     cfg,
		log:     cfg.Logger,
		issuer:  issuer,
		url:     cfg.URL,
		resched: make(chan struct{}, 1),
		first:   make(chan struct{}),
	}
	if cfg.Client == nil {
		r.cfg.Client, r.ownClient = newClient(), true
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.snap.Store(&snapshot{set: emptySet})
	return r, nil
}

// Start begins background refreshing and waits for the first fetch, which
// is bounded by cfg.Timeout (a discovered source first retries discovery,
// with backoff, until ctx ends). It returns that fetch's error, or ctx's,
// but the source keeps trying in the background either way, so a later
// fetch can still succeed; Close stops it. ctx bounds only the wait.
func (r *Remote) Start(ctx context.Context) error {
	r.mu.Lock()
	switch {
	case r.closed:
		r.mu.Unlock()
		return ErrClosed
	case r.started:
		r.mu.Unlock()
		return errors.New("key source already started")
	}
	r.started = true
	r.wg.Add(1)
	r.mu.Unlock()
	go r.run()

	select {
	case <-r.first:
		return r.firstErr
	case <-r.ctx.Done():
		return ErrClosed
	case <-ctx.Done():
		if err := r.Status().LastError; err != nil {
			return fmt.Errorf("%w; last error: %w", ctx.Err(), err)
		}
		return ctx.Err()
	}
}

// Close stops the background refresh, abandons the fetch in flight and
// waits for every goroutine of the source to end. The set in force keeps
// serving (until its MaxStale runs out); Refetch no longer fetches.
// Close may be called more than once.
func (r *Remote) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	if r.ownClient {
		r.cfg.Client.CloseIdleConnections()
	}
}

// Current returns the key set in force, or an empty set before the first
// successful fetch and after the last one is MaxStale past its refresh
// time. It takes no lock and never returns nil.
func (r *Remote) Current() *jose.KeySet {
	s := r.snap.Load()
	if !r.cfg.Now().Before(s.expires) {
		return emptySet
	}
	return s.set
}

// Refetch fetches the keys again because a token named an unknown kid, and
// returns the set in force afterwards. Callers arriving while a fetch is in
// flight share it; otherwise a fetch starts only if the last one Refetch
// started is at least RefetchInterval old, and Current is returned at once
// if not. When ctx ends first, Refetch returns Current while the fetch
// carries on for the others.
func (r *Remote) Refetch(ctx context.Context) *jose.KeySet {
	r.mu.Lock()
	c := r.inflight
	if c == nil {
		if now := r.cfg.Now(); r.lastRefetch.IsZero() || now.Sub(r.lastRefetch) >= r.cfg.RefetchInterval {
			if c = r.shareLocked(false); c != nil {
				r.lastRefetch = now
			}
		}
	}
	r.mu.Unlock()
	if c != nil {
		select {
		case <-c.done:
		case <-ctx.Done():
		}
	}
	return r.Current()
}

// Status reports the current set's size and the last fetches' outcome.
func (r *Remote) Status() Status {
	r.mu.Lock()
	st, interval := r.status, r.interval
	r.mu.Unlock()
	st.Keys = r.Current().Len()
	st.Stale = st.LastError != nil && !st.LastSuccess.IsZero() &&
		r.cfg.Now().After(st.LastSuccess.Add(interval))
	return st
}

// URL returns the JWKS URL (password redacted), or "" while a discovered
// source has not found it yet.
func (r *Remote) URL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.url == "" {
		return ""
	}
	return redact(r.url)
}

// run is the refresh loop: fetch, wait as long as the outcome says, again.
func (r *Remote) run() {
	defer r.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.resched:
			timer.Reset(r.nextWait())
			continue
		case <-timer.C:
		}
		r.mu.Lock()
		c := r.shareLocked(true)
		r.mu.Unlock()
		if c == nil {
			return
		}
		select {
		case <-c.done:
		case <-r.ctx.Done():
			return
		}
		timer.Reset(r.nextWait())
	}
}

func (r *Remote) nextWait() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wait
}

// shareLocked returns the fetch in flight, starting one if there is none,
// or nil once the source is closed. r.mu must be held: it makes the check
// of closed and wg.Add one step, so Close's wg.Wait never races an Add.
func (r *Remote) shareLocked(fromLoop bool) *call {
	if r.closed {
		return nil
	}
	if r.inflight != nil {
		return r.inflight
	}
	c := &call{done: make(chan struct{}), fromLoop: fromLoop}
	r.inflight = c
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		fetched, err := r.attempt()
		r.mu.Lock()
		r.inflight = nil
		r.mu.Unlock()
		close(c.done)
		if fetched {
			// After inflight is cleared, so that a Refetch right after
			// Start makes a fetch of its own.
			r.firstOnce.Do(func() {
				r.firstErr = err
				close(r.first)
			})
		}
		if !c.fromLoop {
			select {
			case r.resched <- struct{}{}:
			default:
			}
		}
	}()
	return c
}

// attempt makes one fetch, discovering the JWKS URL first if need be, and
// publishes its outcome. fetched reports whether the JWKS itself was
// fetched (not only discovery tried), and err is its error. Only one attempt
// runs at a time (shareLocked), so publishing needs no further
// coordination. A fetch cut short by Close leaves no trace.
func (r *Remote) attempt() (fetched bool, err error) {
	ctx := r.ctx
	u, err := r.jwksURL(ctx)
	if err == nil {
		start := time.Now()
		var set *jose.KeySet
		var interval time.Duration
		var skipped []jose.SkippedKey
		fctx, span := ctx, trace.Span(nil)
		if r.cfg.Tracer != nil {
			fctx, span = r.cfg.Tracer.Start(ctx, telemetry.SpanJWKSFetch)
		}
		set, interval, skipped, err = r.fetch(fctx, u)
		if span != nil {
			if r.spanIss != "" {
				span.SetAttributes(telemetry.AttrIssuer.String(r.spanIss))
			}
			span.SetAttributes(telemetry.AttrResult.String(resultOf(err)))
			if err == nil {
				span.SetAttributes(attribute.Int("keygate.jwks.keys", set.Len()))
			} else {
				telemetry.Fail(span, resultOf(err))
			}
			span.End()
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		fetched = true
		ev := FetchEvent{URL: redact(u), Result: resultOf(err), Duration: time.Since(start), At: r.cfg.Now(),
			Skipped: r.newlySkipped(u, skipped)}
		if err == nil {
			ev.Keys = set.Len()
			r.succeeded(u, set, interval, ev.At)
		} else {
			r.maybeRediscover(u)
		}
		r.report(ev)
	}
	if err != nil && ctx.Err() == nil {
		r.failed(err)
	}
	return fetched, err
}

// rediscoverAfter is how many JWKS fetches in a row must fail before a
// discovered source asks the issuer's discovery document again: a provider
// that moved its keys to a new jwks_uri is followed, and one that is merely
// down costs one extra request per this many retries.
const rediscoverAfter = 3

// maybeRediscover counts a failed fetch from a discovered url, and forgets
// the url after rediscoverAfter of them so that the next attempt
// discovers again.
func (r *Remote) maybeRediscover(u string) {
	if r.issuer == "" {
		return
	}
	r.mu.Lock()
	r.urlFailures++
	forget := r.urlFailures >= rediscoverAfter && r.url == u
	if forget {
		r.url, r.urlFailures = "", 0
	}
	r.mu.Unlock()
	if forget {
		r.log.Warn("JWKS fetches keep failing; discovering the JWKS URL again", "url", redact(u))
	}
}

// jwksURL returns the JWKS URL, discovering it if it is not known yet.
func (r *Remote) jwksURL(ctx context.Context) (string, error) {
	r.mu.Lock()
	u := r.url
	r.mu.Unlock()
	if u != "" {
		return u, nil
	}
	dctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	start := time.Now()
	u, err := Discover(dctx, r.cfg.Client, r.issuer)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err != nil {
		r.report(FetchEvent{URL: redact(discoveryURL(r.issuer)), Discovery: true,
			Result: resultOf(err), Duration: time.Since(start), At: r.cfg.Now()})
		return "", err
	}
	r.mu.Lock()
	r.url = u
	r.mu.Unlock()
	r.log.Info("discovered JWKS URL", "url", redact(u))
	return u, nil
}

// fetch gets and parses the JWKS at u, returning the usable keys, how long
// to keep them, and the keys left out. Keys are public only (a secret key
// in a JWKS fetched over the network is a leak, not a verification key),
// each bound to one algorithm of the allowed ones (jose.ParsePublicKeySet).
// skipped is set whenever the document parsed, even if no key was usable.
func (r *Remote) fetch(ctx context.Context, u string) (*jose.KeySet, time.Duration, []jose.SkippedKey, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	body, h, err := get(ctx, r.cfg.Client, u, r.cfg.MaxBody)
	if err != nil {
		return nil, 0, nil, err
	}
	set, err := jose.ParsePublicKeySet(body, r.cfg.Algorithms...)
	if err != nil {
		return nil, 0, nil, &FetchError{URL: redact(u), Result: ResultBadJSON, Err: err}
	}
	skipped := set.SkippedKeys()
	if set.Len() == 0 {
		return nil, 0, skipped, &FetchError{URL: redact(u), Result: ResultNoKeys,
			Err: fmt.Errorf("%w; skipped: %s", ErrNoKeys, reasons(skipped))}
	}
	interval := refreshInterval(h, r.cfg.Now(), r.cfg.MinRefresh, r.cfg.MaxRefresh, r.cfg.DefaultRefresh)
	return set, interval, skipped, nil
}

// skipID identifies a skipped key across fetches.
type skipID struct {
	kid, thumb string
	reason     jose.SkipReason
	detail     string
}

// newlySkipped logs the keys of skipped that the previous parsed JWKS did
// not leave out too, and returns them; it then remembers skipped (nil,
// from a fetch that did not parse, forgets nothing). An encryption key
// (bad_use), which identity providers routinely publish beside their
// signing keys, is logged at Info; every other reason at Warn.
func (r *Remote) newlySkipped(u string, skipped []jose.SkippedKey) []jose.SkippedKey {
	if skipped == nil {
		return nil
	}
	seen := make(map[skipID]bool, len(skipped))
	var fresh []jose.SkippedKey
	for _, sk := range skipped {
		id := skipID{sk.KeyID, sk.Thumbprint, sk.Reason, errDetail(sk.Err)}
		if seen[id] {
			continue
		}
		seen[id] = true
		if r.skipped[id] {
			continue
		}
		fresh = append(fresh, sk)
		level := slog.LevelWarn
		if sk.Reason == jose.SkipBadUse {
			level = slog.LevelInfo
		}
		r.log.Log(context.Background(), level, "JWKS key skipped", "url", redact(u), "kid", truncate(sk.KeyID, 100),
			"thumbprint", sk.Thumbprint, "reason", string(sk.Reason), "detail", errDetail(sk.Err))
	}
	r.skipped = seen
	return fresh
}

// truncate cuts s, which comes from the network, to at most n bytes
// (whole UTF-8 sequences) for a log line.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func errDetail(err error) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// reasons lists why keys were skipped, at most ten of them, on one line.
func reasons(errs []jose.SkippedKey) string {
	const most = 10
	var b strings.Builder
	for i, err := range errs {
		if i == most {
			fmt.Fprintf(&b, "; and %d more", len(errs)-most)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if b.Len() == 0 {
		return "none listed"
	}
	return b.String()
}

// succeeded publishes set, fetched from u at now, to serve for interval
// plus MaxStale.
func (r *Remote) succeeded(u string, set *jose.KeySet, interval time.Duration, now time.Time) {
	old := r.snap.Swap(&snapshot{set: set, expires: now.Add(interval).Add(r.cfg.MaxStale)})
	r.mu.Lock()
	r.failures, r.urlFailures, r.wait, r.interval, r.expiredLogged = 0, 0, interval, interval, false
	r.status = Status{LastSuccess: now, LastAttempt: now}
	r.mu.Unlock()
	added, removed := diffKeys(old.set, set)
	if len(added) > 0 || len(removed) > 0 {
		r.log.Info("JWKS updated", "url", redact(u), "keys", set.Len(),
			"added", added, "removed", removed, "refresh_in", interval)
	} else {
		r.log.Debug("JWKS unchanged", "url", redact(u), "keys", set.Len(), "refresh_in", interval)
	}
}

// failed records a failed fetch and schedules a retry with backoff; the
// last good set stays in force.
func (r *Remote) failed(err error) {
	now := r.cfg.Now()
	r.mu.Lock()
	r.failures++
	r.wait = backoff(r.failures, r.cfg.MinRefresh)
	r.status.LastAttempt, r.status.LastError = now, err
	failures, wait, lastSuccess := r.failures, r.wait, r.status.LastSuccess
	s := r.snap.Load()
	expired := s.set.Len() > 0 && !now.Before(s.expires)
	logExpired := expired && !r.expiredLogged
	r.expiredLogged = r.expiredLogged || expired
	r.mu.Unlock()
	r.log.Warn("JWKS fetch failed", "url", r.URL(), "result", resultOf(err),
		"error", err, "failures", failures, "retry_in", wait, "serving_keys", r.Current().Len())
	if logExpired {
		r.log.Error("last good JWKS is past MaxStale; serving no keys",
			"url", r.URL(), "last_success", lastSuccess)
	}
}

func (r *Remote) report(ev FetchEvent) {
	if r.cfg.OnFetch != nil {
		r.cfg.OnFetch(ev)
	}
}

// backoff is the wait after the n-th consecutive failure: 1 s doubling up to
// limit (both capped at limit), with equal jitter, so a fleet of gateways
// does not retry in step.
func backoff(n int, limit time.Duration) time.Duration {
	d := min(time.Second, limit)
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1)
}

// diffKeys names the keys only in b (added) and only in a (removed) by kid,
// algorithm and thumbprint.
func diffKeys(a, b *jose.KeySet) (added, removed []string) {
	names := func(s *jose.KeySet) map[string]bool {
		m := make(map[string]bool, s.Len())
		for _, k := range s.Keys() {
			m[fmt.Sprintf("%.100q %v %s", k.KeyID(), k.Alg(), k.Thumbprint())] = true
		}
		return m
	}
	na, nb := names(a), names(b)
	for n := range nb {
		if !na[n] {
			added = append(added, n)
		}
	}
	for n := range na {
		if !nb[n] {
			removed = append(removed, n)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}
