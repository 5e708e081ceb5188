// Package vaultapi serves Vault's transit secrets engine API under
// /v1/transit/ on keygate's traffic listener, with Vault's paths,
// parameters, answer envelope and status codes, so that Vault's clients
// (the Go client, the CLI with VAULT_ADDR) work against keygate unchanged.
// The keys are package keystore's; the cryptography is package
// transit's.
//
// # Authorization
//
// A request carries a keygate bearer token, in Authorization: Bearer or
// X-Vault-Token (the same token; a request carrying two that differ is
// refused). Only the token service's own tokens are accepted (Options
// Verifier): an external identity provider's token could claim any
// tenant. The token's "tenant" claim is the caller's tenant (a token
// without one is no tenant's, and refused), and its scopes say what the
// caller may do there (see the scope grammar in scope.go). A request
// without a valid token, or without the scope the route needs, is refused
// 403 {"errors":["permission denied: ..."]}, the text saying which problem
// it is (no token, a token refused and why, no tenant, the scope missing)
// and the audit record's reason naming it. The decision is made from the
// scopes alone before anything is looked up, so that a refusal never
// confirms that a key exists. A key is looked up in the caller's tenant only: another tenant's
// key is simply not found (404), on every route.
//
// # Answers
//
// Success is Vault's envelope {"request_id":…,"lease_id":"",
// "renewable":false,"lease_duration":0,"data":{…},"wrap_info":null,
// "warnings":…,"auth":null}; 204 where Vault answers 204 (delete, import,
// restore); errors are {"errors":["…"]} (package httperr's Vault envelope): 400 for
// bad input, 403, 404, 405, 413 over a limit, 429 with Retry-After when the
// caller or its tenant already has as many asymmetric-key operations in
// progress as the engine takes from one, 503 with Retry-After when the
// store does not answer, 503 "Vault is sealed" while the node is sealed,
// and 500 revealing nothing. A request is
// decided in full before anything is written: bad input never produces a
// partial answer.
//
// # Limits
//
// A request body is at most Options.MaxBodyBytes (4 MiB by default) and a
// batch_input at most Options.MaxBatchItems items (10,000), and its items
// together may cost at most the engine's budget (transit.Options
// MaxBatchCost: a cost per item by key type and operation, so that
// thousands of AES items fit but only dozens of rsa-4096 signatures);
// beyond them the answer is 413, before any item is done. Private-key work
// is done for the token's tenant and principal (transit.Caller), which
// share the engine's workers fairly. A key name is at most keystore.MaxNameBytes (128)
// bytes, so that its audit records name it: a longer one is 400 where a
// key is made and names no key elsewhere (404). The engine's own limits
// (transit.MaxInputBytes, ...) apply to each item.
//
// # Backups
//
// backup/:name answers a key's full state (configuration and every
// version it keeps) as base64 text in keygate's own format (Vault's is
// Vault's); only keys with exportable and allow_plaintext_backup set have
// one, since it holds the key material in plaintext. restore and
// restore/:name make the backup's key the caller's tenant's (transit:admin,
// audited as a key's creation), refusing a name the tenant has unless
// force is set. A backup is parsed in full (transit.ParseBackup) before
// anything is written. Neither is ever logged.
//
// # Audit
//
// Every request fills one Outcome (operation, tenant, principal, key,
// version, status, reason — never plaintext, ciphertext, keys or tokens)
// and hands it to Options.Observe before its answer is written; an error
// from Observe turns the answer into a 500.
package vaultapi
