// Package tenantkey keeps each tenant's data key: the 256-bit key under
// which what a tenant keeps secret in the store (its transit keys'
// versions; next, its secrets) is sealed, while only the data key itself
// is sealed under the root key (package rootkey), in the tenant's row.
// [Keys] makes a tenant's data key on its first use, stores it once (of
// nodes racing to make one, one wins and the others read it) and holds it
// unsealed in memory until the root key is sealed ([Keys.Forget]).
//
// # Tenants deleted and made again
//
// A tenant deleted and made again under its name is another tenant, with
// another data key. What a node holds of the deleted one must not be used
// for it: so new key material is sealed only under the data key the
// tenant's row holds as it is read now ([Keys.Fresh]), a deletion is
// announced to every node, each of which drops the tenant's key
// ([Keys.Drop]), and a value that does not open under the held key
// ([Keys.Get]) is tried again by the caller under the row's current one.
// (What is left: a deletion and re-creation landing between a writer's
// read of the row and its write. A tenant is deleted only once it holds
// no keys, so that takes an admin racing a key's creation within
// milliseconds.)
//
// # Security
//
// A [Key] is opaque: its bytes are never exported and it prints as its
// tenant's name. The raw key is zeroed once its AES key schedule is made;
// Go gives no way to zero memory inside crypto/aes, so Forget drops the
// keys for the garbage collector, as rootkey.Keyring.Seal does.
package tenantkey
