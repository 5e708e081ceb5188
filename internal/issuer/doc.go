// Package issuer is keygate's token service: it signs tokens with the
// managed, scheduled-rotation signing keys of package signingkeys and
// answers the OAuth 2.0 endpoints.
//
// # Tenants
//
// Every access token names its client's tenant in the [TenantClaim] claim,
// the default tenant's included. A login looks the user up in the
// authenticating client's tenant only, and answers for a user of another
// tenant exactly as for a name no tenant has, after the same password
// work; introspection shows a client the tokens of its own tenant only. A
// client's or user's tenant never changes, so a refresh takes it from the
// client. The admin API (package admin) manages tenants and sees them all.
package issuer
