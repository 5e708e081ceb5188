package bench

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/server"
	"github.com/keygate/keygate/jose"
)

// Modes of the reference servers a load test compares keygate with.
const (
	// ModeNoop answers every request with 200 and an empty body: the
	// ceiling of the HTTP stack alone.
	ModeNoop = "noop"
	// ModeES256 does one raw ES256 verification (see RawES256) per
	// request, then answers like ModeNoop: the ceiling of a server whose
	// only work per request is the signature check.
	ModeES256 = "es256"
	// ModeES256Table is ModeES256 with the verification keygate itself
	// does: the key prepared once with its table of multiples
	// (jose.P256Verifier), the signature in its JWS form (r‖s). Against it,
	// what keygate adds to the signature check shows, now that its check
	// is faster than crypto/ecdsa's.
	ModeES256Table = "es256-table"
	// ModeSign reads the request body, makes one raw ES256 signature (see
	// RawES256.Sign) and answers 200 with a token response of the size
	// keygate's /oauth2/token sends: the ceiling of a token endpoint whose
	// only work per request is the signature.
	ModeSign = "es256-sign"
	// ModeAESGCM reads the request body, seals 64 bytes (a transit
	// encrypt's input in scripts/loadtest-transit.sh) with AES-256-GCM
	// under a cached cipher and a fresh random nonce, and answers the
	// base64 of nonce‖ciphertext‖tag in a small JSON document: the ceiling
	// of an encryption service whose only work per request is the cipher.
	ModeAESGCM = "aes-gcm"
)

// Modes lists the reference server modes.
var Modes = []string{ModeNoop, ModeES256, ModeES256Table, ModeSign, ModeAESGCM}

// Handler returns the handler of a reference server in mode, behind
// Guard. Past Guard, the modes ignore the request (method, path, headers)
// beyond what net/http itself parses.
func Handler(mode string) (http.Handler, error) {
	h, err := handler(mode)
	if err != nil {
		return nil, err
	}
	return Guard(mode, h), nil
}

func handler(mode string) (http.Handler, error) {
	switch mode {
	case ModeNoop:
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusOK)
		}), nil
	case ModeES256, ModeES256Table:
		raw, err := newRawES256Mode(mode)
		if err != nil {
			return nil, err
		}
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if !raw.Verify() {
				http.Error(w, "raw ES256 verification failed", http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		}), nil
	case ModeSign:
		raw, err := NewRawES256()
		if err != nil {
			return nil, err
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, io.LimitReader(r.Body, 16<<10)) //nolint:errcheck // the body only has to be read
			sig, err := raw.Sign()
			if err != nil {
				http.Error(w, "raw ES256 signing failed", http.StatusInternalServerError)
				return
			}
			body := make([]byte, 0, 1024)
			body = append(body, `{"access_token":"`...)
			body = append(body, raw.msg...)
			body = append(body, '.')
			body = base64.RawURLEncoding.AppendEncode(body, sig)
			body = append(body, `","token_type":"Bearer","expires_in":900,"scope":"demo"}`+"\n"...)
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			w.Write(body) //nolint:errcheck // the client went away
		}), nil
	case ModeAESGCM:
		return aesGCMHandler()
	}
	return nil, fmt.Errorf("unknown server mode %q (one of %s)", mode, strings.Join(Modes, ", "))
}

// aesGCMHandler is ModeAESGCM's handler.
func aesGCMHandler() (http.Handler, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	pt := make([]byte, 64)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 16<<10)) //nolint:errcheck // the body only has to be read
		var buf [512]byte
		nonce := buf[:12]
		rand.Read(nonce) //nolint:errcheck // crypto/rand.Read does not fail
		sealed := gcm.Seal(nonce, nonce, pt, nil)
		body := append(buf[len(sealed):len(sealed)], `{"data":{"ciphertext":"vault:v1:`...)
		body = base64.StdEncoding.AppendEncode(body, sealed)
		body = append(body, `","key_version":1}}`+"\n"...)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		w.Write(body) //nolint:errcheck // the client went away
	}), nil
}

// ShutdownTimeout bounds how long Serve waits for requests in flight.
const ShutdownTimeout = 5 * time.Second

// Serve serves h on ln with the same net/http settings as keygate's
// traffic listener (timeouts and header limit), so that a reference server
// differs from keygate only in its handler. It returns when ctx is done
// and the server has shut down, closing ln.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := server.NewHTTPServer(h, slog.New(slog.DiscardHandler))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		err = errors.Join(err, srv.Close())
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// RawES256 is the ES256 verification primitive alone, as a careful caller
// uses it: a pre-parsed P-256 public key, a fixed signing input (the
// header and claims of a realistic token) and its signature, already in
// ASN.1 DER form. Verify hashes the signing input with SHA-256 and calls
// crypto/ecdsa.VerifyASN1, which is the whole cost of an ES256 check that
// keygate's own work is compared with.
type RawES256 struct {
	pub *ecdsa.PublicKey
	// table, when set, verifies instead of crypto/ecdsa, over p1363 (the
	// signature as r‖s): ModeES256Table.
	table *jose.P256Verifier
	p1363 []byte
	priv  *ecdsa.PrivateKey // for ModeSign
	msg   []byte            // signing input: base64url(header) "." base64url(claims)
	der   []byte            // ASN.1 DER signature over SHA-256(msg)
}

// NewRawES256 creates a fresh key and signs the signing input of a token of
// realistic size with it.
func NewRawES256() (*RawES256, error) {
	f, err := newFixture(jose.ES256)
	if err != nil {
		return nil, err
	}
	return newRawES256(f)
}

func newRawES256(f *fixture) (*RawES256, error) {
	priv, ok := f.priv.(*ecdsa.PrivateKey)
	if !ok || f.signer.Alg() != jose.ES256 {
		return nil, fmt.Errorf("raw verification measures ES256 only, not %s", f.signer.Alg())
	}
	dot := strings.LastIndexByte(f.token, '.')
	if dot < 0 {
		return nil, errors.New("fixture token has no signature")
	}
	msg := []byte(f.token[:dot])
	digest := sha256.Sum256(msg)
	der, err := ecdsa.SignASN1(rand.Reader, priv, digest[:])
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	r := &RawES256{pub: &priv.PublicKey, priv: priv, msg: msg, der: der}
	if !r.Verify() {
		return nil, errors.New("raw ES256 signature does not verify")
	}
	return r, nil
}

// Sign makes a fresh ASN.1 DER signature over the signing input, with
// crypto/rand: the raw ES256 signing primitive.
func (r *RawES256) Sign() ([]byte, error) {
	digest := sha256.Sum256(r.msg)
	return ecdsa.SignASN1(rand.Reader, r.priv, digest[:])
}

// Verify reports whether the signature verifies; it always should.
func (r *RawES256) Verify() bool {
	digest := sha256.Sum256(r.msg)
	if r.table != nil {
		return r.table.VerifyP1363(digest[:], r.p1363)
	}
	return ecdsa.VerifyASN1(r.pub, digest[:], r.der)
}

// newRawES256Mode is NewRawES256, verifying with the key's table for the
// table modes (ModeES256Table, ModeGRPCES256Table).
func newRawES256Mode(mode string) (*RawES256, error) {
	r, err := NewRawES256()
	if err != nil || (mode != ModeES256Table && mode != ModeGRPCES256Table) {
		return r, err
	}
	var sig struct{ R, S *big.Int }
	if _, err := asn1.Unmarshal(r.der, &sig); err != nil {
		return nil, fmt.Errorf("raw ES256 signature: %w", err)
	}
	r.p1363 = make([]byte, 64)
	sig.R.FillBytes(r.p1363[:32])
	sig.S.FillBytes(r.p1363[32:])
	r.table = jose.NewP256Verifier(r.pub)
	// The table is built on the key's second use, as keygate's is.
	for range 2 {
		if !r.Verify() {
			return nil, errors.New("raw ES256 signature does not verify with the key's table")
		}
	}
	if !r.table.HasTable() {
		return nil, errors.New("the key's table was not built (FIPS 140-3 mode, or the bound on tables)")
	}
	return r, nil
}

// VerifyRaw measures RawES256.Verify, the primitive alone, for each
// algorithm of cfg; only ES256 is supported.
func VerifyRaw(ctx context.Context, cfg Config) ([]Result, error) {
	return each(ctx, cfg, rawOp)
}

func rawOp(f *fixture) (func() error, error) {
	r, err := newRawES256(f)
	if err != nil {
		return nil, err
	}
	return func() error {
		if !r.Verify() {
			return errors.New("raw ES256 signature does not verify")
		}
		return nil
	}, nil
}
