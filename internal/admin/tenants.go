package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/keygate/keygate/internal/audit/httpaudit"
	"github.com/keygate/keygate/internal/httperr"
	"github.com/keygate/keygate/internal/store"
)

// Tenants through the admin API. A tenant is a namespace of clients, users
// and transit keys (store.Tenant); every token names its client's tenant
// (issuer.TenantClaim). The admin token sees every tenant. A tenant is named
// wherever the admin API takes one the same way: a name that
// store.ValidTenantName refuses is 400 invalid_request saying why, a
// tenant that does not exist 404 not_found naming it, as Vault answers a
// namespace it does not have.

type tenantView struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// errNoTenant is a tenant named in a request that does not exist.
func errNoTenant(name string) *httperr.Error {
	return &httperr.Error{Status: http.StatusNotFound, Code: "not_found", Description: fmt.Sprintf("tenant %q does not exist", name)}
}

// invalidTenant is the 400 for err, the store's refusal of a tenant name
// (store.ValidTenantName, store.TenantOrDefault, store.DeletableTenant),
// whose text says why; nil stays nil.
func invalidTenant(err error) error {
	if err == nil {
		return nil
	}
	return invalidRequest(strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": "))
}

// errFixedTenant refuses a change of a client's or user's (what) tenant:
// the tenant is part of every token issued to it, of a refresh family's
// identity and of the per-account login limit, so it is fixed at creation.
func errFixedTenant(what string) *httperr.Error {
	return invalidRequest(fmt.Sprintf("a %s's tenant cannot be changed: create a new %s in the other tenant", what, what))
}

// inTenantError is a failed store write of what into tenant: the store's
// ErrNotFound there means the tenant does not exist.
func inTenantError(what, tenant string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNoTenant(tenant)
	}
	return storeError(what, err)
}

// tenantFilter reads a list's ?tenant= filter: filter is false without
// one; a tenant that cannot be a name is 400, one that does not exist 404,
// and the parameter given twice or empty 400.
func (a *API) tenantFilter(r *http.Request) (tenant string, filter bool, err error) {
	vs, ok := r.URL.Query()["tenant"]
	switch {
	case !ok:
		return "", false, nil
	case len(vs) != 1:
		return "", false, invalidRequest("give the tenant filter once")
	}
	if err := a.tenantExists(r.Context(), vs[0]); err != nil {
		return "", false, err
	}
	return vs[0], true, nil
}

// listIn lists what (clients, users) of every tenant with all, or, with the
// request's ?tenant= filter (tenantFilter), of that tenant with in.
func listIn[T any](a *API, r *http.Request, what string,
	all func(context.Context) ([]T, error), in func(context.Context, string) ([]T, error)) ([]T, error) {
	tenant, filter, err := a.tenantFilter(r)
	if err != nil {
		return nil, err
	}
	var list []T
	if filter {
		list, err = in(r.Context(), tenant)
	} else {
		list, err = all(r.Context())
	}
	if err != nil {
		return nil, storeError(what, err)
	}
	return list, nil
}

// tenantExists is nil if name is a tenant, else 400 or 404 (see above).
func (a *API) tenantExists(ctx context.Context, name string) error {
	if err := invalidTenant(store.ValidTenantName(name)); err != nil {
		return err
	}
	if _, err := a.store.GetTenant(ctx, name); err != nil {
		return inTenantError("tenant", name, err)
	}
	return nil
}

func (a *API) createTenant(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Name string `json:"name"`
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if err := invalidTenant(store.ValidTenantName(in.Name)); err != nil {
		return err
	}
	httpaudit.From(w).Tenant(in.Name)
	t := store.Tenant{Name: in.Name, CreatedAt: a.cfg.Now().UTC()}
	err := a.store.CreateTenant(r.Context(), t)
	if errors.Is(err, store.ErrConflict) {
		return &httperr.Error{Status: http.StatusConflict, Code: "conflict", Description: fmt.Sprintf("tenant %q already exists", in.Name)}
	}
	if err != nil {
		return storeError("tenant", err)
	}
	writeJSON(w, http.StatusCreated, tenantView{Name: t.Name, CreatedAt: t.CreatedAt})
	return nil
}

func (a *API) listTenants(w http.ResponseWriter, r *http.Request) error {
	ts, err := a.store.ListTenants(r.Context())
	if err != nil {
		return storeError("tenants", err)
	}
	out := make([]tenantView, 0, len(ts))
	for _, t := range ts {
		out = append(out, tenantView{Name: t.Name, CreatedAt: t.CreatedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"tenants": out})
	return nil
}

func (a *API) getTenant(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := invalidTenant(store.ValidTenantName(name)); err != nil {
		return err
	}
	t, err := a.store.GetTenant(r.Context(), name)
	if err != nil {
		return inTenantError("tenant", name, err)
	}
	writeJSON(w, http.StatusOK, tenantView{Name: t.Name, CreatedAt: t.CreatedAt})
	return nil
}

// deleteTenant removes an empty tenant. The default tenant is never
// deleted (400); a tenant that still holds clients, users or transit keys
// is 409, saying how many of each, and is left as it was.
func (a *API) deleteTenant(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := invalidTenant(store.DeletableTenant(name)); err != nil {
		return err
	}
	err := a.store.DeleteTenant(r.Context(), name)
	switch {
	case errors.Is(err, store.ErrNotEmpty):
		return a.notEmpty(r.Context(), name)
	case err != nil:
		return inTenantError("tenant", name, err)
	}
	if p := a.cfg.Publisher; p != nil {
		p.TenantDeleted(r.Context(), name)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// notEmpty is the 409 for a tenant the store would not delete: what it
// still holds, counted now.
func (a *API) notEmpty(ctx context.Context, name string) error {
	st := a.store
	cs, err := st.ListClientsIn(ctx, name)
	if err != nil {
		return storeError("clients", err)
	}
	us, err := st.ListUsersIn(ctx, name)
	if err != nil {
		return storeError("users", err)
	}
	names, err := st.ListTransitKeys(ctx, name)
	if err != nil {
		return storeError("transit keys", err)
	}
	var ks []string
	for _, n := range names {
		if !store.InternalKey(n) { // the transit layer's own rows go with the tenant
			ks = append(ks, n)
		}
	}
	// Counted up to one page: past that, "10000 secrets" says enough.
	ss, err := st.ListSecrets(ctx, name, "", "", store.MaxSecretList)
	if err != nil {
		return storeError("secrets", err)
	}
	return &httperr.Error{Status: http.StatusConflict, Code: "conflict", Description: fmt.Sprintf(
		"tenant %q still holds %s, %s, %s and %s: delete them first", name,
		count(len(cs), "client"), count(len(us), "user"), count(len(ks), "transit key"), count(len(ss), "secret"))}
}

// count is "1 user", "2 users".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
