package vaultsys

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/vaultauth"
	"github.com/keygate/keygate/internal/verify"
)

// LookupSelfOptions configure the lookup-self handler.
type LookupSelfOptions struct {
	Verifier vaultauth.Verifier // required: the token service's own tokens
	Sealed   func() bool        // nil: never sealed
	Now      func() time.Time   // nil: time.Now
	Logger   *slog.Logger       // nil discards
}

// tokenOut is Vault's description of a token.
type tokenOut struct {
	Accessor       string            `json:"accessor"`
	CreationTime   int64             `json:"creation_time"`
	CreationTTL    int64             `json:"creation_ttl"`
	DisplayName    string            `json:"display_name"`
	EntityID       string            `json:"entity_id"`
	ExpireTime     *string           `json:"expire_time"`
	ExplicitMaxTTL int64             `json:"explicit_max_ttl"`
	ID             string            `json:"id"`
	IssueTime      string            `json:"issue_time"`
	Meta           map[string]string `json:"meta"`
	NumUses        int               `json:"num_uses"`
	Orphan         bool              `json:"orphan"`
	Path           string            `json:"path"`
	Policies       []string          `json:"policies"`
	Renewable      bool              `json:"renewable"`
	TTL            int64             `json:"ttl"`
	Type           string            `json:"type"`
}

type lookupHandler struct{ o LookupSelfOptions }

// NewLookupSelf returns the handler of LookupSelfPath: GET (or POST, as
// Vault takes both) with a valid token, answered with what that token
// holds: its scopes as policies, its tenant in meta, its principal as
// display_name, the seconds it has left as ttl.
func NewLookupSelf(o LookupSelfOptions) (http.Handler, error) {
	if o.Verifier == nil {
		return nil, errors.New("vaultsys.LookupSelfOptions: Verifier is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Logger = discard(o.Logger)
	return lookupHandler{o}, nil
}

func (h lookupHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.serve(w, r); err != nil {
		writeError(w, r, h.o.Logger, err)
	}
}

func (h lookupHandler) serve(w http.ResponseWriter, r *http.Request) error {
	if h.o.Sealed != nil && h.o.Sealed() {
		return errSealed
	}
	res, tenant, err := vaultauth.Authenticate(r.Context(), r.Header, h.o.Verifier)
	if err != nil {
		return err
	}
	if r.URL.Path != LookupSelfPath {
		return errNoPath
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodPut {
		return errMethod
	}
	writeJSON(w, r, h.o.Logger, http.StatusOK, vaultauth.Envelope{RequestID: vaultauth.RequestID(httpaudit.From(w)), Data: describe(res, tenant, h.o.Now())})
	return nil
}

// describe is the token in Vault's shape. Its id is the token's jti, not
// the token: Vault's id is the token itself, but a keygate token is a
// bearer JWT that may be logged or cached by whatever shows the answer
// (the CLI prints it), and its jti is what revocation and the audit log
// name it by.
func describe(res *verify.Result, tenant string, now time.Time) tokenOut {
	out := tokenOut{DisplayName: vaultauth.Principal(res), ID: res.ID, Meta: map[string]string{"tenant": tenant},
		Orphan: true, Policies: strings.Fields(res.Scope), Type: "service"}
	if out.Policies == nil {
		out.Policies = []string{}
	}
	iat, ok := numericClaim(res, "iat")
	if ok {
		out.CreationTime = iat.Unix()
		out.IssueTime = iat.UTC().Format(time.RFC3339Nano)
	}
	if !res.Expiry.IsZero() {
		exp := res.Expiry.UTC().Format(time.RFC3339Nano)
		out.ExpireTime = &exp
		out.TTL = max(0, int64(res.Expiry.Sub(now)/time.Second))
		if ok {
			out.CreationTTL = int64(res.Expiry.Sub(iat) / time.Second)
		}
	}
	return out
}

// numericClaim reads a NumericDate claim (whole seconds; a fraction is
// dropped).
func numericClaim(res *verify.Result, name string) (time.Time, bool) {
	raw, ok := res.Token.Claims.Raw(name)
	if !ok {
		return time.Time{}, false
	}
	s, _, _ := strings.Cut(string(raw), ".")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}
