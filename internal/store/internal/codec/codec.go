// Package codec holds the column encodings the SQLite and PostgreSQL
// stores share: scope lists as JSON text, and byte columns that must not be
// NULL.
package codec

import (
	"encoding/json"
	"fmt"
)

// EncodeScopes stores a scope list as a JSON array ("[]" when empty).
func EncodeScopes(s []string) (string, error) {
	if len(s) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("scopes: %w", err)
	}
	return string(b), nil
}

// DecodeScopes reads EncodeScopes's column back; an empty list is nil.
func DecodeScopes(b []byte) ([]string, error) {
	var out []string
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("scopes: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// NonNil returns b, or an empty slice for nil, for NOT NULL byte columns.
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
