// Package flow implements Control Programs ("Flows"): declarative manifests
// that say which transitions a business process may take, who may take them
// and with which capabilities, and a kernel that prescribes and applies
// those transitions while people keep the final say.
//
// # Programs
//
// A program is a JSON manifest (schema_version 1). [Load] runs it through a
// fixed pipeline: a strict decoder (no unknown or duplicate keys at any
// depth, no trailing data, valid UTF-8, integers only, at most 16 MiB and 64
// levels deep), validation of every manifest rule against a runtime
// [Inventory] of effects, verifiers and capabilities, normalization (sets
// sorted, transition ids qualified as "<program_id>/<id>"), and the
// canonical executable representation: RFC 8785 (JCS) bytes of the
// normalized program without schema_version, program_version and
// requires_runtime. The program's fingerprint is "sha256:" and the hex
// SHA-256 of those bytes, so whitespace, key order, set order, transition
// order and the program version never change it, while every change the
// kernel can observe does. Failures are reported as an [ErrorList] of
// [Error] values with a stable code (PROGRAM_INVALID,
// PROGRAM_SCHEMA_UNSUPPORTED, RUNTIME_TOO_OLD), a JSON path such as
// "transitions[2].required_capabilities[1]" and a message that says what to
// do; nothing is built from an invalid program.
//
// # Decisions
//
// An [Instance] runs one program, identified by fingerprint, and holds a
// phase, facts ({facet: {status, value}}), an optional objective and a
// revision. [Resolve] applies the kernel law to an instance for a
// [Principal] and returns a [Decision]: PRESCRIBED, MARKED, FRONTIER,
// BLOCKED, REFUSED or UNRESOLVED, with a reason for every transition not
// chosen. Candidates are ordered by selection-class rank, priority and
// qualified id; ties are never broken automatically. A PRESCRIBED decision
// carries a content-addressed [Prescription] ("prx-…") that binds the
// instance, revision, program, state snapshot, authority, capabilities and
// parameters, and expires two minutes after it is issued. Admission requires
// the transition's capabilities plus its effect's kernel minimum to be
// declared by the program (CAPABILITY_NOT_DECLARED) and granted to the
// principal (CAPABILITY_DENIED); the effective set is exactly that set.
//
// # The kernel
//
// A [Kernel] keeps programs, instances, prescriptions, approvals, the journal
// and receipts in a [Store] ([MemoryStore] in memory; other stores implement
// the same small transactional interface). [Kernel.Apply] re-resolves under
// the instance and owned-resource locks (STALE_PRESCRIPTION,
// PRESCRIPTION_EXPIRED), journals begun and executing, runs the transition's
// [Effect] with only the effective capabilities, verifies the result with the
// transition's [Verifier], and commits the new state, revision N+1, a
// content-addressed [Receipt] ("rcp-…") and the journal's committed entry in
// one transaction. Applying the same prescription again returns the same
// receipt. An effect that fails locally leaves the instance untouched
// (aborted); one whose outcome is uncertain puts the instance in recovery
// mode (recovery_required), where the facets of the transition's target
// conditions become unknown, only RECOVERY transitions are selectable and
// re-applying is refused (RECOVERY_REQUIRED). [Kernel.RecoverInterrupted]
// does the same, at start, for applies a crash cut short.
//
// Loading a program is a person's or the operator's act:
// [Kernel.AddProgram] (the operator) and [Kernel.LoadProgram] by a person,
// or by a service granted flow.load, make it active; another principal's
// load is only proposed until [Kernel.ApproveProgram]. Only active programs
// start instances, and [Kernel.ActiveProgram] says which one a program id
// names.
//
// A transition that needs a person (authority "human", the capability
// human.approve, or the effect control.apply, since applying staged control
// values is a person's act) resolves for an agent as FRONTIER awaiting
// "human".
// [Kernel.RequestApproval] records an [Approval] that shows a person what
// they are asked to allow, secrets hidden, and binds what it will act on
// (its [Binding] list, from the effect's [Binder]); [Kernel.Approve] takes
// the bindings again, refuses as stale (STALE_PRESCRIPTION) if anything
// moved, and otherwise admits and applies exactly them with the person's
// grants plus human.approve for that one admission; [Kernel.Decline]
// refuses it with a reason.
//
// Effects are supplied by the application through
// [Inventory.RegisterEffect]: state.assign is built in; run.spawn, tool.call
// and control.apply are known by name and kernel minimum and fail with
// EFFECT_UNAVAILABLE until wired.
//
// The package has no global mutable state and imports nothing else of the
// application; the runtime version comes in through [NewInventory].
package flow
