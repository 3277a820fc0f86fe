package flow

import (
	"fmt"
	"slices"
	"strings"

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

// DecodeApprovalRecord reads a stored approval record strictly: unknown
// or duplicate keys, invalid UTF-8, an id that is not "apr-…", an unknown
// status, or a secret parameter or binding that shows its value are
// refused with STATE_INVALID, so that a damaged record can neither be
// decided nor show a secret. A raw value kept for a secret parameter is
// dropped.
func DecodeApprovalRecord(data []byte) (ApprovalRecord, error) {
	var rec ApprovalRecord
	if err := json.Unmarshal(data, &rec, json.RejectUnknownMembers(true)); err != nil {
		return ApprovalRecord{}, &Error{Code: CodeStateInvalid, Message: "the approval record is not valid: " + err.Error()}
	}
	a := &rec.Approval
	bad := func(path, msg string) (ApprovalRecord, error) {
		return ApprovalRecord{}, &Error{Code: CodeStateInvalid, Path: path, Message: msg}
	}
	if !strings.HasPrefix(a.ID, "apr-") || len(a.ID) > 80 {
		return bad("approval.id", "an approval id is apr- and a digest")
	}
	switch a.Status {
	case ApprovalPending, ApprovalApproved, ApprovalDeclined, ApprovalStale, ApprovalApproving:
	default:
		return bad("approval.status", fmt.Sprintf("%q is not an approval status", a.Status))
	}
	if a.Instance == "" || a.Transition == "" {
		return bad("approval", "an approval names its instance and transition")
	}
	for i, p := range a.Parameters {
		if p.Secret && p.Value != "" {
			return bad(fmt.Sprintf("approval.parameters[%d]", i), "a secret parameter carries no value")
		}
		if p.Secret {
			// Records written before secret values were kept out of
			// storage carry them here: drop them, so that the approval
			// asks again rather than use or show a stored secret.
			delete(rec.Parameters, p.Name)
		}
	}
	if a.Quorum < 0 || a.Quorum > MaxQuorum {
		return bad("approval.quorum", fmt.Sprintf("a quorum is 0 to %d people", MaxQuorum))
	}
	if a.Fallback != "" && a.Fallback != FallbackDecline {
		return bad("approval.fallback", fmt.Sprintf("the only fallback is %q", FallbackDecline))
	}
	if a.EscalateTo != "" && !isName(a.EscalateTo) {
		return bad("approval.escalate_to", "a group to escalate to is a name")
	}
	if len(a.Approvers) > a.People() {
		return bad("approval.approvers", "an approval has no more approvers than its quorum")
	}
	for i, v := range a.Approvers {
		if v.Person == "" || slices.ContainsFunc(a.Approvers[:i], func(o Approver) bool { return o.Person == v.Person }) {
			return bad(fmt.Sprintf("approval.approvers[%d]", i), "each approver is a distinct person")
		}
	}
	for i, b := range a.Bindings {
		if b.Kind == "" || b.Name == "" {
			return bad(fmt.Sprintf("approval.bindings[%d]", i), "a binding has a kind and a name")
		}
		if b.Secret && (b.Value != "" || b.Current != "") {
			return bad(fmt.Sprintf("approval.bindings[%d]", i), "a secret binding carries no value")
		}
	}
	return rec, nil
}
