package secrets

// CheckObject reports whether raw is one JSON object in UTF-8, of at most
// MaxValueBytes, with no key twice in any object and nothing after it, as
// every value the store keeps must be: other Vault APIs hold their
// request bodies to the same rule, so that no two readers of one body can
// see different values. The error wraps ErrInvalid or ErrTooLarge and
// names what.
func CheckObject(what string, raw []byte) error {
	_, err := parseObject(what, raw)
	return err
}
