package kvapi

import (
	"encoding/json"
	"strconv"
)

// The answers to reads and writes are the API's hot path: they are
// written here by hand, byte for byte as encoding/json writes them (the
// members of vaultauth.Envelope in its order, strings escaped as
// encoding/json escapes them), without its reflection, and a secret's data
// goes in as stored (JSON the engine checked and compacted when it was
// written), not checked and compacted again. Every other answer is
// encoded by encoding/json into the same envelope.

// readOut is a read's data: the secret's data and its version's metadata.
type readOut struct {
	Data     json.RawMessage `json:"data"`
	Metadata versionOut      `json:"metadata"`
}

// appendEnvelope appends Vault's envelope of data out, with the request id,
// as json.Marshal(vaultauth.Envelope{RequestID: id, Data: out}) would.
func appendEnvelope(b []byte, id string, out any) ([]byte, error) {
	b = append(b, `{"request_id":`...)
	b = appendString(b, id)
	b = append(b, `,"lease_id":"","renewable":false,"lease_duration":0,"data":`...)
	var err error
	switch o := out.(type) {
	case readOut:
		b = append(b, `{"data":`...)
		b = append(b, o.Data...)
		b = append(b, `,"metadata":`...)
		b, err = appendVersion(b, o.Metadata)
		b = append(b, '}')
	case versionOut:
		b, err = appendVersion(b, o)
	default:
		var j []byte
		j, err = json.Marshal(out)
		b = append(b, j...)
	}
	if err != nil {
		return nil, err
	}
	return append(b, `,"wrap_info":null,"warnings":null,"auth":null}`...), nil
}

// appendVersion appends v as json.Marshal(v) would.
func appendVersion(b []byte, v versionOut) ([]byte, error) {
	b = append(b, `{"created_time":`...)
	b = appendString(b, v.CreatedTime)
	b = append(b, `,"custom_metadata":`...)
	if v.CustomMetadata == nil {
		b = append(b, "null"...)
	} else {
		j, err := json.Marshal(v.CustomMetadata) // rare: sorted keys, escaping
		if err != nil {
			return nil, err
		}
		b = append(b, j...)
	}
	b = append(b, `,"deletion_time":`...)
	b = appendString(b, v.DeletionTime)
	b = append(b, `,"destroyed":`...)
	b = strconv.AppendBool(b, v.Destroyed)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(v.Version), 10)
	return append(b, '}'), nil
}

// appendString appends s quoted as encoding/json quotes it: as it is when
// it holds only printable ASCII that needs no escape (request ids, times),
// else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s) // a string always encodes
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
