package node

// Code generated from store.Store's method set (a go/types walk over
// internal/store); regenerate it when the interface changes: tracedStore
// embeds nothing, so a new method fails to compile here rather than go
// untraced.

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/keygate/keygate/internal/store"
	"github.com/keygate/keygate/internal/telemetry"
)

// tracedStore gives each store call made under a recording span a child
// span, keygate.store.<method> (snake case), with no attribute: what a
// call reads or writes (client secrets' hashes, sealed keys, token ids)
// is never recorded. The node wraps its store in it only when tracing is
// on; a call without a recording span costs one context lookup.
type tracedStore struct{ st store.Store }

var _ store.Store = tracedStore{}

func (s tracedStore) AddRevocation(ctx context.Context, r store.Revocation) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.add_revocation", trace.SpanKindClient)
	defer span.End()
	return s.st.AddRevocation(ctx, r)
}

func (s tracedStore) AddTransitKeyVersion(ctx context.Context, v store.TransitKeyVersion) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.add_transit_key_version", trace.SpanKindClient)
	defer span.End()
	return s.st.AddTransitKeyVersion(ctx, v)
}

func (s tracedStore) AppendAudit(ctx context.Context, entries []store.AuditEntry) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.append_audit", trace.SpanKindClient)
	defer span.End()
	return s.st.AppendAudit(ctx, entries)
}

func (s tracedStore) AuditEntries(ctx context.Context, node string, fromSeq uint64, limit int) ([]store.AuditEntry, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.audit_entries", trace.SpanKindClient)
	defer span.End()
	return s.st.AuditEntries(ctx, node, fromSeq, limit)
}

func (s tracedStore) AuditNodes(ctx context.Context) ([]string, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.audit_nodes", trace.SpanKindClient)
	defer span.End()
	return s.st.AuditNodes(ctx)
}

func (s tracedStore) Close() error { return s.st.Close() }

func (s tracedStore) CreateClient(ctx context.Context, c store.Client) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.create_client", trace.SpanKindClient)
	defer span.End()
	return s.st.CreateClient(ctx, c)
}

func (s tracedStore) CreateRefreshToken(ctx context.Context, t store.RefreshToken) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.create_refresh_token", trace.SpanKindClient)
	defer span.End()
	return s.st.CreateRefreshToken(ctx, t)
}

func (s tracedStore) CreateTenant(ctx context.Context, t store.Tenant) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.create_tenant", trace.SpanKindClient)
	defer span.End()
	return s.st.CreateTenant(ctx, t)
}

func (s tracedStore) CreateTransitKey(ctx context.Context, k store.TransitKey, first store.TransitKeyVersion) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.create_transit_key", trace.SpanKindClient)
	defer span.End()
	return s.st.CreateTransitKey(ctx, k, first)
}

func (s tracedStore) CreateUser(ctx context.Context, u store.User) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.create_user", trace.SpanKindClient)
	defer span.End()
	return s.st.CreateUser(ctx, u)
}

func (s tracedStore) DeleteClient(ctx context.Context, id string) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.delete_client", trace.SpanKindClient)
	defer span.End()
	return s.st.DeleteClient(ctx, id)
}

func (s tracedStore) DeleteExpiredRefreshTokens(ctx context.Context, now time.Time) (int, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.delete_expired_refresh_tokens", trace.SpanKindClient)
	defer span.End()
	return s.st.DeleteExpiredRefreshTokens(ctx, now)
}

func (s tracedStore) DeleteExpiredRevocations(ctx context.Context, now time.Time, subjectsBefore time.Time) (int, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.delete_expired_revocations", trace.SpanKindClient)
	defer span.End()
	return s.st.DeleteExpiredRevocations(ctx, now, subjectsBefore)
}

func (s tracedStore) DeleteSigningKey(ctx context.Context, kid string) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.delete_signing_key", trace.SpanKindClient)
	defer span.End()
	return s.st.DeleteSigningKey(ctx, kid)
}

func (s tracedStore) DeleteTenant(ctx context.Context, name string) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.delete_tenant", trace.SpanKindClient)
	defer span.End()
	return s.st.DeleteTenant(ctx, name)
}

func (s tracedStore) DeleteTransitKey(ctx context.Context, tenant string, name string, revision int64) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.delete_transit_key", trace.SpanKindClient)
	defer span.End()
	return s.st.DeleteTransitKey(ctx, tenant, name, revision)
}

func (s tracedStore) DeleteUser(ctx context.Context, id string) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.delete_user", trace.SpanKindClient)
	defer span.End()
	return s.st.DeleteUser(ctx, id)
}

func (s tracedStore) GetClient(ctx context.Context, id string) (store.Client, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.get_client", trace.SpanKindClient)
	defer span.End()
	return s.st.GetClient(ctx, id)
}

func (s tracedStore) GetRefreshToken(ctx context.Context, digest []byte) (store.RefreshToken, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.get_refresh_token", trace.SpanKindClient)
	defer span.End()
	return s.st.GetRefreshToken(ctx, digest)
}

func (s tracedStore) GetTenant(ctx context.Context, name string) (store.Tenant, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.get_tenant", trace.SpanKindClient)
	defer span.End()
	return s.st.GetTenant(ctx, name)
}

func (s tracedStore) GetTransitKey(ctx context.Context, tenant string, name string) (store.TransitKey, []store.TransitKeyVersion, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.get_transit_key", trace.SpanKindClient)
	defer span.End()
	return s.st.GetTransitKey(ctx, tenant, name)
}

func (s tracedStore) GetTransitKeyVersion(ctx context.Context, tenant string, name string, version int) (store.TransitKeyVersion, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.get_transit_key_version", trace.SpanKindClient)
	defer span.End()
	return s.st.GetTransitKeyVersion(ctx, tenant, name, version)
}

func (s tracedStore) GetUser(ctx context.Context, id string) (store.User, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.get_user", trace.SpanKindClient)
	defer span.End()
	return s.st.GetUser(ctx, id)
}

func (s tracedStore) GetUserByName(ctx context.Context, tenant string, username string) (store.User, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.get_user_by_name", trace.SpanKindClient)
	defer span.End()
	return s.st.GetUserByName(ctx, tenant, username)
}

func (s tracedStore) ListClients(ctx context.Context) ([]store.Client, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.list_clients", trace.SpanKindClient)
	defer span.End()
	return s.st.ListClients(ctx)
}

func (s tracedStore) ListClientsIn(ctx context.Context, tenant string) ([]store.Client, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.list_clients_in", trace.SpanKindClient)
	defer span.End()
	return s.st.ListClientsIn(ctx, tenant)
}

func (s tracedStore) ListSigningKeys(ctx context.Context) ([]store.SigningKey, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.list_signing_keys", trace.SpanKindClient)
	defer span.End()
	return s.st.ListSigningKeys(ctx)
}

func (s tracedStore) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.list_tenants", trace.SpanKindClient)
	defer span.End()
	return s.st.ListTenants(ctx)
}

func (s tracedStore) ListTransitKeys(ctx context.Context, tenant string) ([]string, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.list_transit_keys", trace.SpanKindClient)
	defer span.End()
	return s.st.ListTransitKeys(ctx, tenant)
}

func (s tracedStore) ListUsers(ctx context.Context) ([]store.User, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.list_users", trace.SpanKindClient)
	defer span.End()
	return s.st.ListUsers(ctx)
}

func (s tracedStore) ListUsersIn(ctx context.Context, tenant string) ([]store.User, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.list_users_in", trace.SpanKindClient)
	defer span.End()
	return s.st.ListUsersIn(ctx, tenant)
}

func (s tracedStore) PutSigningKey(ctx context.Context, k store.SigningKey) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.put_signing_key", trace.SpanKindClient)
	defer span.End()
	return s.st.PutSigningKey(ctx, k)
}

func (s tracedStore) RetireSigningKey(ctx context.Context, kid string, at time.Time) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.retire_signing_key", trace.SpanKindClient)
	defer span.End()
	return s.st.RetireSigningKey(ctx, kid, at)
}

func (s tracedStore) Revocations(ctx context.Context, now time.Time) ([]store.Revocation, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.revocations", trace.SpanKindClient)
	defer span.End()
	return s.st.Revocations(ctx, now)
}

func (s tracedStore) RevokeRefreshFamily(ctx context.Context, digest []byte) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.revoke_refresh_family", trace.SpanKindClient)
	defer span.End()
	return s.st.RevokeRefreshFamily(ctx, digest)
}

func (s tracedStore) RotateRefreshToken(ctx context.Context, issuer string, old []byte, next store.RefreshToken, now time.Time) (store.RefreshToken, error) {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.rotate_refresh_token", trace.SpanKindClient)
	defer span.End()
	return s.st.RotateRefreshToken(ctx, issuer, old, next, now)
}

func (s tracedStore) SetTenantDataKey(ctx context.Context, name string, sealed []byte) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.set_tenant_data_key", trace.SpanKindClient)
	defer span.End()
	return s.st.SetTenantDataKey(ctx, name, sealed)
}

func (s tracedStore) TrimTransitKey(ctx context.Context, tenant string, name string, minAvailable int) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.trim_transit_key", trace.SpanKindClient)
	defer span.End()
	return s.st.TrimTransitKey(ctx, tenant, name, minAvailable)
}

func (s tracedStore) UpdateClient(ctx context.Context, c store.Client) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.update_client", trace.SpanKindClient)
	defer span.End()
	return s.st.UpdateClient(ctx, c)
}

func (s tracedStore) UpdateClientSecret(ctx context.Context, id string, digest []byte, at time.Time) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.update_client_secret", trace.SpanKindClient)
	defer span.End()
	return s.st.UpdateClientSecret(ctx, id, digest, at)
}

func (s tracedStore) UpdateTransitKey(ctx context.Context, k store.TransitKey) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.update_transit_key", trace.SpanKindClient)
	defer span.End()
	return s.st.UpdateTransitKey(ctx, k)
}

func (s tracedStore) UpdateUser(ctx context.Context, u store.User) error {
	ctx, span := telemetry.StartChild(ctx, "keygate.store.update_user", trace.SpanKindClient)
	defer span.End()
	return s.st.UpdateUser(ctx, u)
}
