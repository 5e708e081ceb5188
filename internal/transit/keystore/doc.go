// Package keystore keeps keygate's named transit keys: each tenant's
// keys in the store, opened under the tenant's data key (package
// tenantkey), assembled into [transit.Key] snapshots and cached, and the
// changes Vault's transit API makes to them — create, configure, rotate,
// trim, delete, import, import_version — stored so that the nodes of a
// fleet agree. Package vaultapi serves it over HTTP; package transit does
// the cryptography.
//
// # Storage and sealing
//
// A key is one store row (its configuration, [transit.MarshalConfig]) and
// one row per version ([transit.MarshalVersion]), never one record that
// grows with every rotation. A version's row is sealed under its tenant's
// data key ([tenantkey.Key], AES-256-GCM), with associated data naming the
// key and the version, so a row copied to another key, version or tenant
// does not open; the data key alone is sealed under the root key. A
// tenant's keys are found under its name only: a caller of one tenant
// cannot reach, list or learn of another's keys (ErrNotFound).
//
// # Fleet
//
// Every change is stored with the store's optimistic concurrency: a
// configuration change and a deletion name the revision they read
// (store.Store.UpdateTransitKey, store.Store.DeleteTransitKey) and a new
// version is added only after the latest one
// (store.Store.AddTransitKeyVersion), so of two nodes changing a key at
// once exactly one wins and the other re-reads the key and decides again
// (a key whose deletion_allowed another node just turned off is not
// deleted). A change is announced on the node's "transit" notice channel,
// and every node re-reads the key at once; a notice that arrives during a
// read of the key wins over it (a deletion's keeps the read from being
// cached, a change's makes the key be read once more). No node serves a
// key it read more than RefreshAfter ago, notice or not: the first use
// after that reads it again before it is served, and a use from 3/4 of
// RefreshAfter on re-reads it in the background. A ciphertext naming a
// version newer than the cached latest is answered by re-reading the key
// ([Service.Newer]), so a version another node just made decrypts
// everywhere at once. auto_rotate_period is checked on the node's schedule,
// and the store's concurrency makes each due rotation happen once per
// fleet.
//
// # Tenants deleted and made again
//
// A tenant made again under a deleted one's name is another tenant with
// another data key. New key material (a key's first version, a rotation,
// an import, the wrapping key) is sealed under the data key the tenant's
// row holds as it is read for the change (tenantkey.Keys.Fresh),
// never under one held in memory; a version that does not open under the
// held key is opened again under the row's before it is reported
// corrupt; and a deletion announced by the admin API (the node's
// OnTenantDeleted, see [Node]) drops the tenant's opened keys and wrapping key at
// every node at once.
//
// # Sealing the node
//
// While the node is sealed every operation fails with rootkey.ErrSealed,
// and when it seals the cache, the wrapping keys and the keys the engine
// derived from a context are dropped at once, with the tenants' data keys:
// no opened key version, nor anything derived from one, outlives the seal.
// A deleted key's derived keys go with it (at every node, on the
// deletion's notice).
package keystore
