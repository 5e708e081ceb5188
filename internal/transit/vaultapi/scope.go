package vaultapi

import "strings"

// Scopes. A token's scopes (its space-separated "scope" claim) grant
// transit operations in the token's tenant:
//
//	transit:admin              key management: create, read, list, config,
//	                           rotate, trim, delete, import, import_version,
//	                           export, wrapping_key, backup, restore
//	transit:<op>:<key>         op on the key named <key>, or on every key
//	                           whose name starts with <prefix> when <key>
//	                           is <prefix>* ("*" alone: every key);
//	                           op is encrypt, decrypt, rewrap, datakey,
//	                           sign, verify (signatures and HMACs), hmac or
//	                           read (the key's public parts and metadata)
//	transit:random             random bytes
//	transit:hash               hashing
//
// A scope grants nothing else: transit:admin does not encrypt, and
// transit:encrypt:k does not create k (encrypting with a missing key
// creates it, as Vault's upsert does, only for a caller holding both
// transit:encrypt:<key> and transit:admin). A '*' anywhere but at the end
// of <key> matches no key (no key name holds one). The decision is made
// from the scopes alone, before anything is looked up.

// op is what a route asks of the caller's scopes.
type op uint8

const (
	opAdmin op = iota + 1
	opEncrypt
	opDecrypt
	opRewrap
	opDataKey
	opSign
	opVerify
	opHMAC
	opRead
	opRandom
	opHash
)

var opNames = [...]string{opAdmin: "admin", opEncrypt: "encrypt", opDecrypt: "decrypt", opRewrap: "rewrap",
	opDataKey: "datakey", opSign: "sign", opVerify: "verify", opHMAC: "hmac", opRead: "read", opRandom: "random", opHash: "hash"}

func (o op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return ""
}

// permits reports whether the space-separated scopes grant o on key (key
// is ignored for admin, random and hash). It allocates nothing.
func permits(scopes string, o op, key string) bool {
	for scopes != "" {
		var tok string
		tok, scopes, _ = strings.Cut(scopes, " ")
		if grants(tok, o, key) {
			return true
		}
	}
	return false
}

// grants reports whether one scope grants o on key.
func grants(scope string, o op, key string) bool {
	rest, ok := strings.CutPrefix(scope, "transit:")
	if !ok {
		return false
	}
	switch o {
	case opAdmin, opRandom, opHash:
		return rest == o.String()
	case opRead:
		if rest == "admin" {
			return true
		}
	case 0:
		return false
	}
	pattern, ok := strings.CutPrefix(rest, o.String())
	if !ok || len(pattern) == 0 || pattern[0] != ':' {
		return false
	}
	pattern = pattern[1:]
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(key, prefix) && !strings.Contains(prefix, "*")
	}
	return pattern == key && key != ""
}
