// Package totp is the arithmetic of time-based one-time passwords (RFC
// 6238 over RFC 4226's HOTP) as Vault's TOTP engine serves them: keys made
// with crypto/rand or read from an otpauth:// URL, codes computed and
// checked with a skew of one period either way, compared in constant time.
// A code is checked once: Check returns the time step it matched, and the
// caller refuses a step at or below the last one it accepted, so a code
// seen on the wire cannot be replayed, even at another node of a fleet
// that shares the key's state. [Keys] keeps a tenant's keys, and that
// state, in the secret store, sealed like any secret.
package totp

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"image/png"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/boombuler/barcode"
	"github.com/boombuler/barcode/qr"
)

// Defaults and bounds, as Vault's where it has them.
const (
	DefaultPeriod  = 30 * time.Second
	DefaultDigits  = 6
	DefaultSkew    = 1
	DefaultKeySize = 20 // bytes of a generated key (160 bits, RFC 4226's recommendation)
	// MinKeySize is the shortest key accepted, generated or imported: 80
	// bits, what most authenticator apps still hand out; RFC 4226 requires
	// no less than 128 bits, so generated keys default to 160.
	MinKeySize = 10
	MaxKeySize = 128
	MaxPeriod  = 24 * time.Hour
)

// ErrInvalid wraps every refusal of a key's parameters or URL.
var ErrInvalid = errors.New("invalid TOTP key")

// Key is a TOTP key and how its codes are made.
type Key struct {
	Secret      []byte
	Algorithm   string // "SHA1", "SHA256" or "SHA512"
	Digits      int    // 6 or 8
	Period      time.Duration
	Skew        int // 0 or 1: periods either side of now that are also accepted
	Issuer      string
	AccountName string
}

// Generate makes a key of size bytes (0: DefaultKeySize) from rnd, with
// k's other fields (zero ones take their defaults).
func Generate(rnd io.Reader, size int, k Key) (*Key, error) {
	if size == 0 {
		size = DefaultKeySize
	}
	if size < 16 || size > MaxKeySize {
		return nil, fmt.Errorf("%w: key_size must be 16 to %d bytes, not %d", ErrInvalid, MaxKeySize, size)
	}
	k.Secret = make([]byte, size)
	if _, err := io.ReadFull(rnd, k.Secret); err != nil {
		return nil, fmt.Errorf("random source: %w", err)
	}
	return k.withDefaults()
}

// New checks k, filling zero fields with their defaults.
func New(k Key) (*Key, error) { return k.withDefaults() }

func (k Key) withDefaults() (*Key, error) {
	if k.Algorithm == "" {
		k.Algorithm = "SHA1"
	}
	k.Algorithm = strings.ToUpper(k.Algorithm)
	if k.Digits == 0 {
		k.Digits = DefaultDigits
	}
	if k.Period == 0 {
		k.Period = DefaultPeriod
	}
	switch {
	case newHash(k.Algorithm) == nil:
		return nil, fmt.Errorf("%w: algorithm must be SHA1, SHA256 or SHA512, not %q", ErrInvalid, k.Algorithm)
	case k.Digits != 6 && k.Digits != 8:
		return nil, fmt.Errorf("%w: digits must be 6 or 8, not %d", ErrInvalid, k.Digits)
	case k.Period < time.Second || k.Period > MaxPeriod || k.Period%time.Second != 0:
		return nil, fmt.Errorf("%w: period must be whole seconds, 1s to %v, not %v", ErrInvalid, MaxPeriod, k.Period)
	case k.Skew != 0 && k.Skew != 1:
		return nil, fmt.Errorf("%w: skew must be 0 or 1, not %d", ErrInvalid, k.Skew)
	case len(k.Secret) < MinKeySize || len(k.Secret) > MaxKeySize:
		return nil, fmt.Errorf("%w: the key must be %d to %d bytes, not %d", ErrInvalid, MinKeySize, MaxKeySize, len(k.Secret))
	}
	return &k, nil
}

func newHash(alg string) func() hash.Hash {
	switch alg {
	case "SHA1":
		return sha1.New
	case "SHA256":
		return sha256.New
	case "SHA512":
		return sha512.New
	}
	return nil
}

// Step is the time step t falls in.
func (k *Key) Step(t time.Time) int64 {
	return t.Unix() / int64(k.Period/time.Second)
}

// Code returns the code for t.
func (k *Key) Code(t time.Time) string { return k.code(k.Step(t)) }

var pow10 = [...]uint32{6: 1_000_000, 8: 100_000_000}

func (k *Key) code(step int64) string {
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], uint64(step))
	m := hmac.New(newHash(k.Algorithm), k.Secret)
	m.Write(msg[:])
	sum := m.Sum(nil)
	off := sum[len(sum)-1] & 0x0f // RFC 4226 §5.3, dynamic truncation
	v := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	s := strconv.FormatUint(uint64(v%pow10[k.Digits]), 10)
	return strings.Repeat("0", k.Digits-len(s)) + s
}

// Check reports whether code is the code of t's step or, with Skew 1, of
// the step before or after it, and which step it matched. Every candidate
// is computed and compared in constant time, so the time taken does not
// say which matched.
func (k *Key) Check(code string, t time.Time) (step int64, ok bool) {
	now := k.Step(t)
	for s := now - int64(k.Skew); s <= now+int64(k.Skew); s++ {
		if subtle.ConstantTimeCompare([]byte(k.code(s)), []byte(code)) == 1 && !ok {
			step, ok = s, true
		}
	}
	return step, ok
}

// URL is the key as an otpauth:// URL, what authenticator apps scan.
func (k *Key) URL() string {
	label := k.AccountName
	if k.Issuer != "" {
		label = k.Issuer + ":" + k.AccountName
	}
	q := url.Values{}
	q.Set("secret", base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(k.Secret))
	if k.Issuer != "" {
		q.Set("issuer", k.Issuer)
	}
	q.Set("algorithm", k.Algorithm)
	q.Set("digits", strconv.Itoa(k.Digits))
	q.Set("period", strconv.Itoa(int(k.Period/time.Second)))
	return (&url.URL{Scheme: "otpauth", Host: "totp", Path: "/" + label, RawQuery: q.Encode()}).String()
}

// ParseURL reads an otpauth://totp/ URL (the Key Uri Format authenticator
// apps use); skew is not part of it.
func ParseURL(raw string) (*Key, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: url: not a URL", ErrInvalid)
	case u.Scheme != "otpauth":
		return nil, fmt.Errorf("%w: url: the scheme must be otpauth", ErrInvalid)
	case u.Host != "totp":
		return nil, fmt.Errorf("%w: url: only totp keys, not %q", ErrInvalid, u.Host)
	}
	q := u.Query()
	var k Key
	label := strings.TrimPrefix(u.Path, "/")
	if iss, acct, ok := strings.Cut(label, ":"); ok {
		k.Issuer, k.AccountName = strings.TrimSpace(iss), strings.TrimSpace(acct)
	} else {
		k.AccountName = label
	}
	if iss := q.Get("issuer"); iss != "" {
		k.Issuer = iss
	}
	if k.Secret, err = DecodeSecret(q.Get("secret")); err != nil {
		return nil, err
	}
	k.Algorithm = q.Get("algorithm")
	for _, f := range []struct {
		name string
		dst  *int
	}{{"digits", &k.Digits}, {"period", nil}} {
		v := q.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: url: %s must be a positive whole number", ErrInvalid, f.name)
		}
		if f.dst != nil {
			*f.dst = n
		} else {
			k.Period = time.Duration(min(n, int(MaxPeriod/time.Second)+1)) * time.Second
		}
	}
	return k.withDefaults()
}

// DecodeSecret reads a base32 key as authenticator apps write it: any
// case, with or without padding or spaces.
func DecodeSecret(s string) ([]byte, error) {
	s = strings.ToUpper(strings.ReplaceAll(s, " ", ""))
	s = strings.TrimRight(s, "=")
	b, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("%w: the key is not base32", ErrInvalid)
	}
	return b, nil
}

// MaxQRSize bounds QR's size in pixels.
const MaxQRSize = 2048

// QR is the key's URL as a size×size PNG QR code (medium error
// correction), what Vault returns as "barcode" for an authenticator app to
// scan.
func (k *Key) QR(size int) ([]byte, error) {
	if size <= 0 || size > MaxQRSize {
		return nil, fmt.Errorf("%w: qr_size must be 1 to %d", ErrInvalid, MaxQRSize)
	}
	code, err := qr.Encode(k.URL(), qr.M, qr.Auto)
	if err != nil {
		return nil, fmt.Errorf("QR code: %w", err)
	}
	if code, err = barcode.Scale(code, size, size); err != nil {
		return nil, fmt.Errorf("%w: qr_size %d is too small for the key's URL", ErrInvalid, size)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, code); err != nil {
		return nil, fmt.Errorf("QR code: %w", err)
	}
	return buf.Bytes(), nil
}
