package issuer

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/keygate/keygate/internal/httperr"
)

// Bearer is a secret a request presents as its bearer token (RFC 6750):
// the admin token, a metrics scrape token. Only the token's SHA-256 is
// kept, and a request's token is compared with it by digest in constant
// time. The zero Bearer is unset and allows nothing. Bearers are not
// comparable: check a request with Allows.
type Bearer struct {
	_      [0]func()
	digest [sha256.Size]byte
	set    bool
}

// NewBearer returns the Bearer of token; "" gives the unset one.
func NewBearer(token string) Bearer {
	if token == "" {
		return Bearer{}
	}
	return Bearer{digest: sha256.Sum256([]byte(token)), set: true}
}

// MinBearerLen is the length a bearer token ReadBearer reads (the admin
// token, the metrics token) must reach, from a file or the environment
// alike.
const MinBearerLen = 32

// ReadBearer reads a bearer token from file (trimmed), else takes value;
// the unset Bearer when neither is set. Either must be at least
// MinBearerLen characters. what names the token in errors; a file that
// cannot be read is an error wrapping the fs error.
func ReadBearer(what, file, value string) (Bearer, error) {
	tok, from := value, ""
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return Bearer{}, fmt.Errorf("%s: %w", what, err)
		}
		tok, from = strings.TrimSpace(string(b)), " in "+file
	}
	if tok != "" && len(tok) < MinBearerLen {
		return Bearer{}, fmt.Errorf("%s%s: at least %d characters are required", what, from, MinBearerLen)
	}
	return NewBearer(tok), nil
}

// Set reports whether b holds a token.
func (b Bearer) Set() bool { return b.set }

// Allows reports whether r carries b's token ("Authorization: Bearer
// ..."). An unset Bearer allows nothing.
func (b Bearer) Allows(r *http.Request) bool {
	v := r.Header.Get("Authorization")
	if !b.set || len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return false
	}
	got := sha256.Sum256([]byte(v[7:]))
	return subtle.ConstantTimeCompare(got[:], b.digest[:]) == 1
}

// Require serves h to the requests b allows, and answers the others 401
// with a Bearer challenge naming realm.
func (b Bearer) Require(realm string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !b.Allows(r) {
			noStore(w)
			httperr.Writer{}.Write(w, r, &httperr.Error{Status: http.StatusUnauthorized, Code: "unauthorized",
				Description: "a bearer token is required", Challenge: `Bearer realm="` + realm + `"`})
			return
		}
		h.ServeHTTP(w, r)
	})
}
