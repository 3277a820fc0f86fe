package flow

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/assent-run/assent/flow/jcs"
)

// FingerprintPrefix starts every program, snapshot and authority
// fingerprint.
const FingerprintPrefix = "sha256:"

// fingerprintOf hashes the canonical bytes of m as they are written, in
// chunks, without keeping them.
func fingerprintOf(m *Manifest, sizeHint int) string {
	h := sha256.New()
	const chunk = 16 << 10
	flush := func(b []byte) []byte {
		if len(b) < chunk {
			return b
		}
		h.Write(b)
		return b[:0]
	}
	b := appendCanonical(make([]byte, 0, min(sizeHint+sizeHint/8+256, chunk+8<<10)), m, flush)
	h.Write(b)
	out := make([]byte, len(FingerprintPrefix)+hex.EncodedLen(sha256.Size))
	copy(out, FingerprintPrefix)
	hex.Encode(out[len(FingerprintPrefix):], h.Sum(nil))
	return string(out)
}

// Fingerprint returns "sha256:" followed by the 64 lowercase hex digits of
// the SHA-256 of b. A program's fingerprint is Fingerprint of its canonical
// bytes.
func Fingerprint(b []byte) string {
	sum := sha256.Sum256(b)
	out := make([]byte, len(FingerprintPrefix)+hex.EncodedLen(len(sum)))
	copy(out, FingerprintPrefix)
	hex.Encode(out[len(FingerprintPrefix):], sum[:])
	return string(out)
}

// appendCanonical writes the canonical executable representation of a
// normalized manifest: RFC 8785 bytes of an object with the keys
// capabilities, objective_contracts, owned_resources, program_id and
// transitions. Keys are written in their JCS order by hand; empty optional
// members are omitted. When flush is not nil it is called with the bytes
// written so far after each transition and returns the buffer to continue
// in, which lets a caller hash a large program in bounded memory.
func appendCanonical(b []byte, m *Manifest, flush func([]byte) []byte) []byte {
	b = append(b, '{')
	first := true
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	caps := m.Capabilities
	if len(caps.CapabilitySurface)+len(caps.Effects)+len(caps.Verifiers) > 0 {
		sep()
		b = append(b, `"capabilities":{`...)
		inner := true
		b = appendSetMember(b, &inner, "capability_surface", caps.CapabilitySurface)
		b = appendSetMember(b, &inner, "effects", caps.Effects)
		b = appendSetMember(b, &inner, "verifiers", caps.Verifiers)
		b = append(b, '}')
	}
	if len(m.ObjectiveContracts) > 0 {
		sep()
		b = append(b, `"objective_contracts":[`...)
		for i := range m.ObjectiveContracts {
			if i > 0 {
				b = append(b, ',')
			}
			oc := &m.ObjectiveContracts[i]
			b = append(b, '{')
			inner := true
			b = appendConditionsMember(b, &inner, "conditions", oc.Conditions)
			b = appendStringMember(b, &inner, "objective", oc.Objective)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(m.OwnedResources) > 0 {
		sep()
		b = append(b, `"owned_resources":`...)
		b = appendStrings(b, m.OwnedResources)
	}
	sep()
	b = append(b, `"program_id":`...)
	b = jcs.AppendString(b, m.ProgramID)
	if len(m.Transitions) > 0 {
		sep()
		b = append(b, `"transitions":[`...)
		for i := range m.Transitions {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTransition(b, &m.Transitions[i])
			if flush != nil {
				b = flush(b)
			}
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendTransition(b []byte, t *Transition) []byte {
	b = append(b, '{')
	first := true
	if r := t.Approval; r != nil {
		// A rule is kept only when it says more than "one person":
		// see the validator, so the object is never empty here.
		first = false
		b = append(b, `"approval":{`...)
		inner := true
		if r.DeadlineSeconds > 0 {
			b = appendKey(b, &inner, "deadline_seconds")
			b = jcs.AppendInt(b, r.DeadlineSeconds)
		}
		if r.EscalateTo != "" {
			b = appendStringMember(b, &inner, "escalate_to", r.EscalateTo)
		}
		// The default fallback is left out, like a quorum of one.
		if r.Fallback != "" && r.Fallback != FallbackDecline {
			b = appendStringMember(b, &inner, "fallback", r.Fallback)
		}
		if r.Group != "" {
			b = appendStringMember(b, &inner, "group", r.Group)
		}
		if r.Quorum > 1 {
			b = appendKey(b, &inner, "quorum")
			b = jcs.AppendInt(b, r.Quorum)
		}
		b = append(b, '}')
	}
	if len(t.Assignments) > 0 {
		b = appendKey(b, &first, "assignments")
		b = append(b, '[')
		for i, a := range t.Assignments {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"facet":`...)
			b = jcs.AppendString(b, a.Facet)
			b = append(b, `,"value":`...)
			b = jcs.AppendString(b, a.Value)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendSetMember(b, &first, "authority", t.Authority)
	b = appendSetMember(b, &first, "authority_all", t.AuthorityAll)
	if t.Effect != "" {
		b = appendStringMember(b, &first, "effect", t.Effect)
	}
	b = appendStringMember(b, &first, "id", t.ID)
	if in := t.Interruption; in != nil {
		b = appendKey(b, &first, "interruption")
		b = append(b, '{')
		inner := true
		b = appendSetMember(b, &inner, "points", in.Points)
		b = appendStringMember(b, &inner, "recovery", in.Recovery)
		b = append(b, '}')
	}
	b = appendSetMember(b, &first, "objectives", t.Objectives)
	b = appendSetMember(b, &first, "owned_resources", t.OwnedResources)
	if len(t.Parameters) > 0 {
		b = appendKey(b, &first, "parameters")
		b = append(b, '[')
		for i, p := range t.Parameters {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = jcs.AppendString(b, p.Name)
			if p.Required {
				b = append(b, `,"required":true`...)
			}
			if p.Secret {
				b = append(b, `,"secret":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if t.Policy != nil && len(t.Policy.ManagedOperations) > 0 {
		b = appendKey(b, &first, "policy")
		b = append(b, '{')
		inner := true
		b = appendSetMember(b, &inner, "managed_operations", t.Policy.ManagedOperations)
		b = append(b, '}')
	}
	if ps := t.Prescription; ps != nil {
		b = appendKey(b, &first, "prescription")
		b = append(b, '{')
		inner := true
		b = appendSetMember(b, &inner, "arguments", ps.Arguments)
		b = appendStringMember(b, &inner, "expected_postcondition", ps.ExpectedPostcondition)
		b = appendStringMember(b, &inner, "operation", ps.Operation)
		b = append(b, '}')
	}
	b = appendKey(b, &first, "priority")
	b = jcs.AppendInt(b, t.Priority)
	b = appendSetMember(b, &first, "required_capabilities", t.RequiredCapabilities)
	b = appendSetMember(b, &first, "required_evidence", t.RequiredEvidence)
	b = appendSetMember(b, &first, "required_identity", t.RequiredIdentity)
	b = appendStringMember(b, &first, "selection_class", t.SelectionClass)
	b = appendConditionsMember(b, &first, "source_conditions", t.SourceConditions)
	b = appendSetMember(b, &first, "source_phases", t.SourcePhases)
	b = appendConditionsMember(b, &first, "target_conditions", t.TargetConditions)
	b = appendSetMember(b, &first, "target_phases", t.TargetPhases)
	b = appendStringMember(b, &first, "verifier", t.Verifier)
	return append(b, '}')
}

// appendCondition writes one condition: {"facet","statuses","values"?}.
func appendCondition(b []byte, c *Condition) []byte {
	b = append(b, `{"facet":`...)
	b = jcs.AppendString(b, c.Facet)
	b = append(b, `,"statuses":`...)
	b = appendStrings(b, c.Statuses)
	if len(c.Values) > 0 {
		b = append(b, `,"values":`...)
		b = appendStrings(b, c.Values)
	}
	return append(b, '}')
}

func appendKey(b []byte, first *bool, key string) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendStringMember(b []byte, first *bool, key, v string) []byte {
	b = appendKey(b, first, key)
	return jcs.AppendString(b, v)
}

// appendSetMember writes key and list, or nothing when list is empty.
func appendSetMember(b []byte, first *bool, key string, list []string) []byte {
	if len(list) == 0 {
		return b
	}
	b = appendKey(b, first, key)
	return appendStrings(b, list)
}

func appendConditionsMember(b []byte, first *bool, key string, list []Condition) []byte {
	if len(list) == 0 {
		return b
	}
	b = appendKey(b, first, key)
	b = append(b, '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCondition(b, &list[i])
	}
	return append(b, ']')
}

func appendStrings(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = jcs.AppendString(b, s)
	}
	return append(b, ']')
}
