package bench

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/crypto/scrypt"

	"github.com/keygate/keygate/jose"
	"github.com/keygate/keygate/middleware"
)

// The modes that redraw the "before" column of the load-test reports
// keygate was started from (../shared/MISSION.md): each does per request
// what those services did, so that 'keygate bench reproduce' can measure
// them beside keygate on the same machine. They check tokens for real
// (a refused token gets 401), unlike the reference modes above.
const (
	// ModeNaiveES256 is the API gateway of the ES256 report: per request
	// it re-reads the PEM public key (pem.Decode and
	// x509.ParsePKIXPublicKey from the bytes held in memory), parses the
	// token the way golang-jwt's ParseWithClaims into MapClaims does
	// (naiveVerify), checks issuer, audience and expiry, and caches
	// nothing.
	ModeNaiveES256 = "naive-es256"
	// ModeNaiveHS256 is the HS256 middleware of the Gin report on
	// net/http: naiveVerify per request with the secret held in memory,
	// no cache.
	ModeNaiveHS256 = "naive-hs256"
	// ModeMiddlewareHS256 is the same handler behind keygate's own Go
	// middleware (package middleware) with the same secret: the "after"
	// of the HS256 report.
	ModeMiddlewareHS256 = "middleware-hs256"
	// ModeNaiveDecrypt is the password manager's decrypt API before its
	// fixes: per request it derives the AES-256 key from the passphrase
	// with scrypt (NaiveScrypt) and builds a fresh AES-GCM, decodes a JSON
	// {"ciphertext": base64(nonce‖ciphertext‖tag)} and answers the
	// plaintext in base64. There is no key cache and no buffer reuse.
	ModeNaiveDecrypt = "naive-aes-gcm-decrypt"
)

// NaiveModes lists the modes that need a key file (Handler's keyFile).
var NaiveModes = []string{ModeNaiveES256, ModeNaiveHS256, ModeMiddlewareHS256, ModeNaiveDecrypt}

// NaiveIssuer and NaiveAudience are what the naive token modes require of
// a token (iss and aud); the tokens 'keygate bench tokens' mints by
// default carry them.
const (
	NaiveIssuer   = issuer
	NaiveAudience = audience
)

// NaiveScrypt are ModeNaiveDecrypt's scrypt parameters and salt. The
// report gives no KDF cost; N=2^11 (about 10 ms per derivation on one core
// of the CI machine) makes one core's naive rate about the report's own
// per core: 3,152 QPS on 32 cores is about 99 a second per core.
var NaiveScrypt = struct {
	N, R, P int
	Salt    []byte
}{N: 1 << 11, R: 8, P: 1, Salt: []byte("keygate-bench-naive-salt")}

// NaiveHandler returns the handler of a naive mode (or of
// ModeMiddlewareHS256). keyFile holds the ES256 public key as PEM
// (ModeNaiveES256), the raw HMAC secret (the HS256 modes, as 'keygate keys
// generate --alg HS256' writes it) or the passphrase (ModeNaiveDecrypt).
// It is served behind Guard, as Handler's modes are.
func NaiveHandler(mode, keyFile string) (http.Handler, error) {
	h, err := naiveHandler(mode, keyFile)
	if err != nil {
		return nil, err
	}
	return Guard(mode, h), nil
}

func naiveHandler(mode, keyFile string) (http.Handler, error) {
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s key: %w", mode, err)
	}
	switch mode {
	case ModeNaiveES256:
		if _, err := parsePEMPublic(key); err != nil {
			return nil, fmt.Errorf("%s key: %w", mode, err)
		}
		return naiveJWT("ES256", func() (any, error) { return parsePEMPublic(key) }), nil
	case ModeNaiveHS256:
		return naiveJWT("HS256", func() (any, error) { return key, nil }), nil
	case ModeMiddlewareHS256:
		return middlewareHS256(key)
	case ModeNaiveDecrypt:
		return naiveDecrypt(key), nil
	}
	return nil, fmt.Errorf("%q is not a naive mode (one of %s)", mode, strings.Join(NaiveModes, ", "))
}

func parsePEMPublic(b []byte) (any, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParsePKIXPublicKey(block.Bytes)
}

// naiveJWT checks the bearer token of every request with naiveVerify.
func naiveJWT(alg string, key func() (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			http.Error(w, "missing bearer token", http.StatusUnauthorized)
			return
		}
		if err := naiveVerify(tok, alg, key, time.Now()); err != nil {
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

var errNaive = errors.New("invalid token")

// naiveVerify does what a JWT library of the reports' kind does per
// request, in the same steps as golang-jwt v5's ParseWithClaims into
// MapClaims (golang-jwt itself stays out of keygate's binary): split the
// token, base64-decode and json.Unmarshal header and claims into
// map[string]any, look the key up (key: re-parsed every time for
// ModeNaiveES256), build the signing input by concatenation, verify with
// math/big ECDSA or a fresh HMAC, then check exp, iss and aud in the map.
func naiveVerify(token, alg string, key func() (any, error), now time.Time) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errNaive
	}
	var header, claims map[string]any
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, dst) != nil {
			return errNaive
		}
	}
	if header["alg"] != alg {
		return errNaive
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return errNaive
	}
	k, err := key()
	if err != nil {
		return err
	}
	signingString := strings.Join(parts[0:2], ".")
	switch alg {
	case "ES256":
		pub, ok := k.(*ecdsa.PublicKey)
		if !ok || len(sig) != 64 {
			return errNaive
		}
		h := sha256.Sum256([]byte(signingString))
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		if !ecdsa.Verify(pub, h[:], r, s) {
			return errNaive
		}
	case "HS256":
		secret, ok := k.([]byte)
		if !ok {
			return errNaive
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte(signingString))
		if !hmac.Equal(sig, mac.Sum(nil)) {
			return errNaive
		}
	default:
		return errNaive
	}
	exp, ok := claims["exp"].(float64)
	if !ok || now.Add(-time.Minute).After(time.Unix(int64(exp), 0)) {
		return errNaive
	}
	if claims["iss"] != issuer {
		return errNaive
	}
	switch aud := claims["aud"].(type) {
	case string:
		if aud == audience {
			return nil
		}
	case []any:
		for _, a := range aud {
			if a == audience {
				return nil
			}
		}
	}
	return errNaive
}

func middlewareHS256(secret []byte) (http.Handler, error) {
	key, err := jose.NewHMACKey(jose.HS256, "", secret)
	if err != nil {
		return nil, fmt.Errorf("%s secret: %w", ModeMiddlewareHS256, err)
	}
	m, err := middleware.New(context.Background(), middleware.Config{Issuers: []middleware.Issuer{{
		Issuer: issuer, Keys: jose.NewKeySet(key), Algorithms: []jose.Alg{jose.HS256}, Audiences: []string{audience},
	}}})
	if err != nil {
		return nil, err
	}
	return m.Require()(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})), nil
}

func naiveDecrypt(passphrase []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		var req struct {
			Ciphertext string `json:"ciphertext"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "bad JSON", http.StatusBadRequest)
			return
		}
		sealed, err := base64.StdEncoding.DecodeString(req.Ciphertext)
		if err != nil {
			http.Error(w, "bad base64", http.StatusBadRequest)
			return
		}
		gcm, err := naiveGCM(passphrase)
		if err != nil {
			http.Error(w, "key", http.StatusInternalServerError)
			return
		}
		if len(sealed) < gcm.NonceSize() {
			http.Error(w, "short ciphertext", http.StatusBadRequest)
			return
		}
		pt, err := gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], nil)
		if err != nil {
			http.Error(w, "decryption failed", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"plaintext": base64.StdEncoding.EncodeToString(pt)}) //nolint:errcheck // the client went away
	})
}

func naiveGCM(passphrase []byte) (cipher.AEAD, error) {
	k, err := scrypt.Key(passphrase, NaiveScrypt.Salt, NaiveScrypt.N, NaiveScrypt.R, NaiveScrypt.P, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// NaiveSeal encrypts plaintext the way ModeNaiveDecrypt decrypts it and
// returns the request body that asks for it back.
func NaiveSeal(passphrase, plaintext []byte) ([]byte, error) {
	gcm, err := naiveGCM(passphrase)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	rand.Read(nonce) //nolint:errcheck // crypto/rand.Read does not fail
	sealed := gcm.Seal(nonce, nonce, plaintext, nil)
	return json.Marshal(map[string]string{"ciphertext": base64.StdEncoding.EncodeToString(sealed)})
}

// WithProfiling serves net/http/pprof's handlers under /debug/pprof/ and
// the Go runtime's and the process's Prometheus metrics at /metrics beside
// h, so that 'keygate bench reproduce' can read a reference or naive
// server's allocations and profile it as it does keygate. It is for
// loopback measuring only: nothing there is guarded.
func WithProfiling(h http.Handler) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", h)
	return mux
}
