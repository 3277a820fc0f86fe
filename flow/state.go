package flow

import (
	"github.com/go-json-experiment/json"
)

// Decode reads a Control Program document strictly without validating it
// against a runtime. It returns the manifest as written when the document is
// well-formed JSON; the error lists syntax or shape problems (unknown keys,
// wrong types, missing keys), if any.
func Decode(data []byte) (*Manifest, error) {
	m, fatal, shape := decodeManifest(data)
	if fatal != nil {
		return nil, ErrorList{fatal}
	}
	if len(shape) > 0 {
		return m, ErrorList(shape)
	}
	return m, nil
}

// DecodeInstance reads an instance state in the JSON field names of
// Instance (phase, facts as {facet: {status, value}}, objective, revision,
// and optionally instance_id, program_fingerprint, recovery). Unknown keys,
// duplicate keys and invalid UTF-8 are refused with STATE_INVALID, and so is
// a state that fails Validate.
func DecodeInstance(data []byte) (Instance, error) {
	var in Instance
	if err := json.Unmarshal(data, &in, json.RejectUnknownMembers(true)); err != nil {
		return Instance{}, &Error{Code: CodeStateInvalid, Message: "the state is not a valid instance: " + err.Error()}
	}
	if in.Facts == nil {
		in.Facts = map[string]Fact{}
	}
	if err := in.Validate(); err != nil {
		return Instance{}, err
	}
	return in, nil
}

// DecodePrincipal reads a principal ({id, kind, grants, policy?}) strictly.
func DecodePrincipal(data []byte) (Principal, error) {
	var pr Principal
	if err := json.Unmarshal(data, &pr, json.RejectUnknownMembers(true)); err != nil {
		return Principal{}, &Error{Code: CodeStateInvalid, Message: "the principal is not valid: " + err.Error()}
	}
	if err := pr.Validate(); err != nil {
		return Principal{}, err
	}
	return pr, nil
}
