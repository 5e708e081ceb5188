package issuer

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"
)

// Password hashing parameters: OWASP's first Argon2id recommendation
// (m=19 MiB, t=2, p=1), which costs about 20–40 ms here and makes offline
// guessing expensive. Hashes carry their parameters (PHC string format), so
// raising them later leaves old hashes verifiable.
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
	// MinPasswordLen is the shortest password accepted (NIST SP 800-63B).
	MinPasswordLen = 8
)

var errBadHash = errors.New("malformed password hash")

// HashPassword returns a PHC-format Argon2id hash of password.
func HashPassword(password string, r io.Reader) (string, error) {
	if len(password) < MinPasswordLen {
		return "", fmt.Errorf("passwords need at least %d characters", MinPasswordLen)
	}
	salt := make([]byte, argonSaltLen)
	if _, err := io.ReadFull(r, salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// CheckPassword reports whether password matches hash, in constant time
// with respect to the hash's value.
func CheckPassword(hash, password string) (bool, error) {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || t == 0 || p == 0 || m > 1<<22 || t > 64 {
		return false, errBadHash
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(want) < 16 || len(want) > 64 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash is checked when a login names no such user, so that the
// answer takes as long as for a real account.
var dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$8fA3YwSLCQkF7ZSt3qyhfw0JZ4/yYhYzGz1vMvjH1bY"

// DefaultPasswordHashWait is how long a request waits for a password-hash
// slot (Config.PasswordHashWait) before it is refused: a few hashes' time.
const DefaultPasswordHashWait = 500 * time.Millisecond

// DefaultPasswordHashes is how many Argon2id computations may run at once
// (Config.PasswordHashes): one per core the Go scheduler uses, and no more
// than take a quarter (19 MiB each) of the process's memory limit, which is
// GOMEMLIMIT when set, else the container's (cgroup v2 memory.max, or
// cgroup v1 memory.limit_in_bytes); at least one.
func DefaultPasswordHashes() int {
	return passwordHashes(runtime.GOMAXPROCS(0), debug.SetMemoryLimit(-1), os.ReadFile)
}

// passwordHashes is DefaultPasswordHashes for procs cores, a Go memory
// limit goLimit (math.MaxInt64: none), and the cgroup files as readFile
// reads them.
func passwordHashes(procs int, goLimit int64, readFile func(string) ([]byte, error)) int {
	lim := goLimit
	if lim == math.MaxInt64 {
		lim = cgroupMemoryLimit(readFile)
	}
	if lim < math.MaxInt64 {
		procs = min(procs, int(lim/4/(argonMemory*1024)))
	}
	return max(1, procs)
}

// cgroupMemoryLimit returns the memory limit of the cgroup this process
// runs in, as the container sees it mounted: cgroup v2's memory.max ("max"
// is none), or where that cannot be read, cgroup v1's
// memory.limit_in_bytes (where none is a number near 2^63, the largest a
// page-aligned int64 holds). math.MaxInt64 stands for none, or for nothing
// readable.
func cgroupMemoryLimit(readFile func(string) ([]byte, error)) int64 {
	if b, err := readFile("/sys/fs/cgroup/memory.max"); err == nil {
		switch v := strings.TrimSpace(string(b)); v {
		case "max":
			return math.MaxInt64
		default:
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				return n
			}
		}
	}
	if b, err := readFile("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < 1<<62 {
			return n
		}
	}
	return math.MaxInt64
}

// ErrHashBusy: every password-hash slot stayed taken for the whole wait.
// WriteError answers it 503 temporarily_unavailable with Retry-After.
var ErrHashBusy = errors.New("too many password hashes at once")

// hashSlots bounds the Argon2id computations running at once. Each costs
// 19 MiB and tens of milliseconds of a core; without a bound, a burst of
// logins (each within its per-address and per-account limits, from many
// addresses) or of admin password changes costs memory and CPU without
// limit. A request that gets no slot within wait is refused with
// ErrHashBusy, so that a queue of hashes never outgrows what the node can
// finish in about that time.
type hashSlots struct {
	sem  chan struct{}
	wait time.Duration
}

func newHashSlots(n int, wait time.Duration) hashSlots {
	if n <= 0 {
		n = DefaultPasswordHashes()
	}
	if wait <= 0 {
		wait = DefaultPasswordHashWait
	}
	return hashSlots{sem: make(chan struct{}, n), wait: wait}
}

// do runs fn in a slot, or returns ErrHashBusy when none frees up within
// the wait (or the request ends first).
func (h hashSlots) do(ctx context.Context, fn func()) error {
	select {
	case h.sem <- struct{}{}:
	default:
		t := time.NewTimer(h.wait)
		defer t.Stop()
		select {
		case h.sem <- struct{}{}:
		case <-t.C:
			return ErrHashBusy
		case <-ctx.Done():
			return ErrHashBusy
		}
	}
	defer func() { <-h.sem }()
	fn()
	return nil
}

// checkPassword is CheckPassword in a hash slot.
func (s *Service) checkPassword(ctx context.Context, hash, password string) (ok bool, err error) {
	if serr := s.hashes.do(ctx, func() { ok, err = CheckPassword(hash, password) }); serr != nil {
		return false, serr
	}
	return ok, err
}

// HashPassword is the package's HashPassword in a hash slot, for the admin
// API's new passwords: it is ErrHashBusy when no slot frees up in time, and
// a password too short to hash is refused without taking one.
func (s *Service) HashPassword(ctx context.Context, password string) (hash string, err error) {
	if len(password) < MinPasswordLen {
		return HashPassword(password, s.cfg.Rand)
	}
	if serr := s.hashes.do(ctx, func() { hash, err = HashPassword(password, s.cfg.Rand) }); serr != nil {
		return "", serr
	}
	return hash, err
}
