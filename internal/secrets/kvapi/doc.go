// Package kvapi serves Vault's KV version 2 secrets engine API under
// /v1/secret/ on keygate's traffic listener, over the secret store
// (package secrets, through its Service interface), with Vault's paths,
// parameters, answer envelope and status codes, so that Vault's clients
// (the Go client's KVv2, the CLI's vault kv, hvac) work against keygate
// unchanged.
//
// # Routes
//
//	data/:path      GET (?version=N) read, POST/PUT write ({"data":{…},"options":{"cas":N}}),
//	                PATCH merge-patch (Content-Type application/merge-patch+json), DELETE the latest version
//	metadata/:path  GET read, POST/PUT write, PATCH merge-patch, DELETE every version and the metadata;
//	                LIST (or GET ?list=true) on metadata/ and metadata/<folder>/
//	delete/:path    POST/PUT {"versions":[…]} soft-deletes them
//	undelete/:path  POST/PUT {"versions":[…]} undoes that
//	destroy/:path   POST/PUT {"versions":[…]} erases them for good
//	subkeys/:path   GET (?version=N&depth=D) the data's keys, every leaf null
//	config          GET, POST/PUT the mount's defaults (max_versions, cas_required, delete_version_after)
//
// # Authorization
//
// A request carries a keygate token (package vaultauth: X-Vault-Token or
// Authorization: Bearer, the token service's own, naming its tenant). Its
// scopes grant, in its tenant:
//
//	secrets:read:<glob>    data GET, subkeys GET, metadata GET
//	secrets:write:<glob>   data POST, PUT and PATCH
//	secrets:delete:<glob>  data DELETE, delete/, undelete/
//	secrets:list:<glob>    LIST of a folder (<glob> matched against the folder, "" for the top, else ending in '/')
//	secrets:admin          metadata POST, PUT, PATCH and DELETE, destroy/, config
//
// <glob> is a path, or a prefix followed by '*' (billing/* grants every
// path under billing/; '*' alone every path); a '*' elsewhere matches
// nothing. A scope grants nothing else: secrets:admin does not read a
// value, secrets:write does not read back. The decision is made from the
// scopes alone, before anything is looked up, so a refusal (403, naming
// the scope that would grant the request) never says whether a path
// exists. Paths are looked up in the caller's tenant only: another
// tenant's path is not found (404), exactly as a missing one.
//
// # Answers
//
// Success is Vault's envelope {"request_id":…,"lease_id":"",
// "renewable":false,"lease_duration":0,"data":…,"wrap_info":null,
// "warnings":null,"auth":null}, or 204 where Vault answers 204 (every
// write but data's, every delete). A read of a deleted or destroyed
// version is 404 with the envelope, its data null and its metadata
// present, as Vault answers. Errors are {"errors":["…"]} (package
// httperr's Vault envelope): 400 for bad input (a wrapped answer asked
// for with X-Vault-Wrap-TTL, which keygate does not make; a path with an empty,
// "." or ".." segment, an encoded slash, control characters or bytes
// that are not UTF-8; a body that is not the JSON asked for; a failed
// check-and-set), 403, 404 ({"errors":[]} as Vault), 405 for a method the
// path does not take, 413 over a limit, 415 for a PATCH that is not a
// JSON merge patch, 503 while the node is sealed or the store does not
// answer, 500 revealing nothing.
//
// # Limits
//
// A request body is at most Options.MaxBodyBytes (DefaultMaxBodyBytes:
// secrets.MaxValueBytes, 1 MiB, plus 64 KiB for the envelope around the
// value); a larger one is refused 413 before it is read. The store's own
// limits (secrets.MaxPathBytes, the custom metadata bounds) apply too.
//
// # Audit
//
// Every request fills one Outcome (operation, tenant, principal, path,
// version, status, reason — never a value, never custom metadata, never
// the token) and hands it to Options.Observe before its answer is
// written; an error from Observe turns the answer into a 500. Behind the
// audit log's handler (package httpaudit), the request's record is told
// the same, and a request that changes the store has its pending record
// written before the change: if that fails, nothing is changed (503).
package kvapi
