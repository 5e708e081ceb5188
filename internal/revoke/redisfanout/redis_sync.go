package redisfanout

import (
	"context"
	"errors"
	"fmt"
	"github.com/keygate/keygate/internal/revoke"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The background sync is two goroutines. The reader owns the subscription's
// receive side: it blocks in Receive (no read deadline, so a slow message
// is never cut in half) and turns what arrives into events. The controller
// owns everything else: it applies messages, resyncs, pings, and decides
// what the set's freshness is. Close cancels the context and closes the
// subscription, which ends both.

type eventKind uint8

const (
	evSubscribed eventKind = iota // the subscription is (re-)established
	evMessage                     // a revocation arrived
	evPong                        // a ping was answered
	evLost                        // the subscription failed
)

type event struct {
	kind    eventKind
	payload string
	err     error
	at      time.Time // by cfg.Now, when the reader received it
}

// resyncPage is the COUNT hint of each ZSCAN.
const resyncPage = 1000

// read receives from the subscription until the Fanout closes.
func (f *Fanout) read() {
	defer f.wg.Done()
	fails := 0
	for {
		ps := f.subscription()
		if ps == nil {
			return
		}
		msg, err := ps.Receive(f.ctx)
		if f.ctx.Err() != nil {
			return
		}
		if err != nil {
			// Start over with a new subscription, whose confirmation tells
			// the controller to resync: go-redis may have reconnected this
			// one already, but not after every kind of failure.
			f.dropSubscription(ps)
			if !f.send(event{kind: evLost, err: err}) || !f.sleep(backoff(fails, f.cfg.PingInterval)) {
				return
			}
			fails++
			continue
		}
		fails = 0
		var ev event
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				ev = event{kind: evSubscribed}
			case "unsubscribe", "sunsubscribe":
				// The server dropped the subscription (a Cluster slot
				// moved): pings would still be answered, but no message
				// would come. Subscribe again, wherever the slot is now.
				f.dropSubscription(ps)
				if !f.send(event{kind: evLost, err: errors.New("unsubscribed by the server")}) {
					return
				}
				continue
			default:
				continue
			}
		case *redis.Message:
			ev = event{kind: evMessage, payload: m.Payload}
		case *redis.Pong:
			ev = event{kind: evPong, payload: m.Payload}
		default:
			continue
		}
		ev.at = f.cfg.Now()
		if !f.send(ev) {
			return
		}
	}
}

// subscription returns the current subscription, creating it if there is
// none, or nil once the Fanout is closed.
func (f *Fanout) subscription() *redis.PubSub {
	f.mu.Lock()
	ps, closed := f.ps, f.closed
	f.mu.Unlock()
	if closed {
		return nil
	}
	if ps != nil {
		return ps
	}
	// Subscribe dials; a failure is not reported here but by the first
	// Receive, which retries the dial.
	if f.cfg.Sharded {
		ps = f.client.SSubscribe(f.ctx, f.channel)
	} else {
		ps = f.client.Subscribe(f.ctx, f.channel)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = ps.Close()
		return nil
	}
	f.ps = ps
	return ps
}

// dropSubscription closes ps and forgets it if it is still the current
// subscription.
func (f *Fanout) dropSubscription(ps *redis.PubSub) {
	f.mu.Lock()
	if f.ps == ps {
		f.ps = nil
	}
	f.mu.Unlock()
	_ = ps.Close() // a second Close, after abandon's or Fanout.Close's, is harmless
}

func (f *Fanout) send(ev event) bool {
	select {
	case f.events <- ev:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// sleep waits d, or until the Fanout closes; it reports whether it is
// still open.
func (f *Fanout) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// syncState is the controller's own state; nothing else touches it.
type syncState struct {
	subscribed bool      // confirmed, and not failed since
	synced     bool      // subscribed, and a resync begun after the confirmation succeeded
	nextSync   time.Time // real time of the next resync
	syncFails  int
	nextPing   time.Time // real time of the next ping (while subscribed)
	pingSeq    uint64
	pingAt     time.Time // cfg.Now when the outstanding ping was sent; zero: none
	pingRealAt time.Time // the same by real time, for the dead-subscription check
}

// control runs the sync until the Fanout closes.
func (f *Fanout) control() {
	defer f.wg.Done()
	var st syncState
	st.nextSync = time.Now() // a first resync at once, whatever the subscription does
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case ev := <-f.events:
			f.handleQueued(&st, ev)
		case <-timer.C:
		}
		f.tick(&st)
		if f.ctx.Err() != nil {
			return
		}
		next := st.nextSync
		if st.subscribed && st.nextPing.Before(next) {
			next = st.nextPing
		}
		timer.Reset(max(time.Until(next), time.Millisecond))
	}
}

// maxBatch bounds how many queued messages are applied in one
// revoke.Memory.Update.
const maxBatch = 1024

// handleQueued handles ev and whatever else is queued behind it. Runs of
// messages are applied in one revoke.Memory.Update, so that a burst of
// revocations (a mass logout) costs one copy of the set, not one each.
func (f *Fanout) handleQueued(st *syncState, ev event) {
	var batch []event
	for {
		if ev.kind != evMessage {
			f.applyAll(st, batch)
			batch = batch[:0]
			f.handle(st, ev)
		} else if batch = append(batch, ev); len(batch) == maxBatch {
			f.applyAll(st, batch)
			batch = batch[:0]
		}
		select {
		case ev = <-f.events:
			continue
		default:
		}
		f.applyAll(st, batch)
		return
	}
}

// applyAll adds the revocations of a run of messages to memory.
func (f *Fanout) applyAll(st *syncState, msgs []event) {
	if len(msgs) == 0 {
		return
	}
	bad := 0
	f.mem.Update(func(b *revoke.Batch) {
		for _, ev := range msgs {
			m, ok := decodeMessage(ev.payload)
			switch {
			case !ok:
				bad++
			case m.kind == kindID:
				b.RevokeID(m.issuer, m.id, time.UnixMicro(m.us))
			case m.kind == kindSubject:
				b.RevokeSubject(m.issuer, m.id, time.UnixMicro(m.us))
			default: // kindSubjectUntil
				b.RevokeSubjectUntil(m.issuer, m.id, time.UnixMicro(m.before), time.UnixMicro(m.us))
			}
		}
	})
	if bad > 0 {
		f.log.Warn("ignoring malformed revocation messages", "count", bad)
	}
	if st.synced {
		f.markFresh(msgs[len(msgs)-1].at)
	}
}

// handle handles every event but messages, which handleQueued batches.
func (f *Fanout) handle(st *syncState, ev event) {
	switch ev.kind {
	case evSubscribed:
		f.mu.Lock()
		was := f.subscribed
		f.subscribed = true
		f.mu.Unlock()
		if !was && f.fresh.Load() != 0 {
			f.log.Info("subscription re-established; resyncing")
		}
		// Whatever was published while the subscription was down is in the
		// set: resync now, and trust messages and pings only after that.
		st.subscribed, st.synced = true, false
		st.nextSync = time.Now()
		st.nextPing = time.Now().Add(f.cfg.PingInterval)
		st.pingAt = time.Time{}
	case evPong:
		if !st.pingAt.IsZero() && ev.payload == strconv.FormatUint(st.pingSeq, 10) {
			// Redis answers in order: every message published before it
			// read the ping has been received before the pong.
			if st.synced {
				f.markFresh(st.pingAt)
			}
			st.pingAt = time.Time{}
		}
	case evLost:
		f.lost(st, ev.err)
	}
}

// lost records that the subscription failed.
func (f *Fanout) lost(st *syncState, err error) {
	f.mu.Lock()
	was := f.subscribed
	f.subscribed = false
	f.lastErr = err
	f.mu.Unlock()
	if was {
		f.log.Warn("subscription lost; serving the last known set", "err", err)
	}
	st.subscribed, st.synced = false, false
	st.pingAt = time.Time{}
}

// tick does whatever is due: a resync, a ping, or giving up on a
// subscription that stopped answering.
func (f *Fanout) tick(st *syncState) {
	now := time.Now()
	if !now.Before(st.nextSync) {
		err := f.resync(f.ctx)
		if f.ctx.Err() != nil {
			return
		}
		if err != nil {
			st.syncFails++
			st.nextSync = time.Now().Add(min(backoff(st.syncFails, f.cfg.ResyncInterval), f.cfg.ResyncInterval))
			if st.syncFails == 1 {
				f.log.Warn("resync failed; serving the last known set", "err", err)
			}
		} else {
			if st.syncFails > 0 {
				f.log.Info("resync succeeded again", "failures", st.syncFails)
			}
			st.syncFails = 0
			st.synced = st.subscribed
			st.nextSync = time.Now().Add(f.cfg.ResyncInterval)
		}
		now = time.Now()
	}
	if st.subscribed && !now.Before(st.nextPing) {
		st.nextPing = now.Add(f.cfg.PingInterval)
		switch {
		case st.pingAt.IsZero():
			f.ping(st, now)
		case now.Sub(st.pingRealAt) > 3*f.cfg.PingInterval:
			f.abandon(st)
		}
	}
	f.checkFailClosed()
}

// ping sends the next ping on the subscription.
func (f *Fanout) ping(st *syncState, now time.Time) {
	f.mu.Lock()
	ps := f.ps
	f.mu.Unlock()
	if ps == nil {
		return
	}
	st.pingSeq++
	st.pingAt, st.pingRealAt = f.cfg.Now(), now
	ctx, cancel := context.WithTimeout(f.ctx, f.cfg.Timeout)
	defer cancel()
	if err := ps.Ping(ctx, strconv.FormatUint(st.pingSeq, 10)); err != nil && f.ctx.Err() == nil {
		f.lost(st, fmt.Errorf("ping: %w", err))
	}
}

// abandon closes a subscription that leaves pings unanswered; the reader
// then makes a new one.
func (f *Fanout) abandon(st *syncState) {
	f.mu.Lock()
	ps := f.ps
	f.ps = nil
	f.mu.Unlock()
	f.lost(st, errors.New("subscription stopped answering pings"))
	if ps != nil {
		_ = ps.Close()
	}
}

// markFresh records that the set was current at t, unless it already was
// at a later time.
func (f *Fanout) markFresh(t time.Time) {
	n := t.UnixNano()
	for {
		old := f.fresh.Load()
		if n <= old || f.fresh.CompareAndSwap(old, n) {
			return
		}
	}
}

// checkFailClosed logs when the Fanout starts or stops failing closed.
func (f *Fanout) checkFailClosed() {
	if f.maxStale <= 0 {
		return
	}
	stale := f.Staleness()
	now := stale > time.Duration(f.maxStale)
	f.mu.Lock()
	was := f.failClosed
	f.failClosed = now
	f.mu.Unlock()
	switch {
	case now && !was && f.fresh.Load() != 0:
		f.log.Error("revocation set too old: refusing every token", "staleness", stale, "max", time.Duration(f.maxStale))
	case !now && was:
		f.log.Info("revocation set current again: verifying", "staleness", stale)
	}
}

// resync loads the sorted sets into memory in one batch, then drops what
// has expired. On success the set is known current as of the time it
// began.
func (f *Fanout) resync(ctx context.Context) error {
	start := f.cfg.Now()
	var ids, subjects, kept []entry
	ids, err := f.scan(ctx, f.keyIDs, plainMember)
	if err == nil {
		subjects, err = f.scan(ctx, f.keySubjects, plainMember)
	}
	if err == nil {
		kept, err = f.scan(ctx, f.keyKeep, decodeKeepMember)
	}
	if err == nil {
		f.mem.Update(func(b *revoke.Batch) {
			for _, e := range ids {
				b.RevokeID(e.issuer, e.id, time.UnixMicro(e.us))
			}
			for _, e := range subjects {
				b.RevokeSubject(e.issuer, e.id, time.UnixMicro(e.us))
			}
			for _, e := range kept {
				b.RevokeSubjectUntil(e.issuer, e.id, time.UnixMicro(e.before), time.UnixMicro(e.us))
			}
		})
	}
	f.mem.Sweep(start.Add(-f.cfg.Grace))
	if f.cfg.SubjectRetention > 0 {
		f.mem.SweepSubjects(start.Add(-f.cfg.SubjectRetention), start.Add(-f.cfg.Grace))
	}
	f.mu.Lock()
	f.lastErr = err
	if err == nil {
		f.lastResync = start
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	f.markFresh(start)
	f.firstOnce.Do(func() { close(f.first) })
	return nil
}

type entry struct {
	issuer, id string
	us         int64 // the score
	before     int64 // subkeep entries: the subject time
}

// scan reads a whole sorted set with ZSCAN, which returns every member
// present from the first page to the last at least once, however the set
// changes meanwhile, without blocking Redis on one big reply.
func (f *Fanout) scan(ctx context.Context, key string, decode func(string) (int64, string, string, bool)) ([]entry, error) {
	var (
		out    []entry
		cursor uint64
		bad    int
	)
	for {
		cctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
		kv, next, err := f.client.ZScan(cctx, key, cursor, "", resyncPage).Result()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("resync %s: %w", key, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			before, issuer, id, ok := decode(kv[i])
			score, err := strconv.ParseFloat(kv[i+1], 64)
			if !ok || err != nil {
				bad++
				continue
			}
			out = append(out, entry{issuer, id, int64(score), before})
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if bad > 0 {
		f.log.Warn("ignoring malformed revocations in Redis", "key", key, "count", bad)
	}
	return out, nil
}

// backoff is the wait after n consecutive failures: from 50 ms doubling up
// to limit, with ±25% jitter so that a fleet does not retry in step.
func backoff(n int, limit time.Duration) time.Duration {
	d := 50 * time.Millisecond << min(n, 16)
	if d > limit || d <= 0 {
		d = limit
	}
	return d - d/4 + rand.N(d/2+1)
}
