package flow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ProgramStatus says whether a stored program may start instances.
type ProgramStatus string

// Program statuses. Only an active program starts instances; a proposed
// one waits for a person, and a declined one stays stored (instances that
// already run it keep running) but starts nothing.
const (
	ProgramActive   ProgramStatus = "active"
	ProgramProposed ProgramStatus = "proposed"
	ProgramDeclined ProgramStatus = "declined"
)

// CapabilityFlowLoad is the token grant that lets a service principal load
// programs itself. People always may; agents never do, they propose.
const CapabilityFlowLoad = "flow.load"

// LoaderOperator is the loader kind of programs added by the application
// or the command line (AddProgram): the operator's own act.
const LoaderOperator = "operator"

// CodeProgramNotActive: the program is proposed or declined, not loaded by
// a person or the operator, so it starts nothing.
const CodeProgramNotActive = "PROGRAM_NOT_ACTIVE"

// ProgramLoad records who loaded a program and whether it may run.
// Loading, or replacing a program that has the same program id, is a
// person's or the operator's act: a program another principal loads is
// only proposed until a person approves it.
type ProgramLoad struct {
	Fingerprint string        `json:"fingerprint"`
	ProgramID   string        `json:"program_id"`
	Version     string        `json:"program_version"`
	Status      ProgramStatus `json:"status"`
	// LoadedBy is the principal that loaded or proposed it; empty for the
	// operator. LoaderKind is its kind, or "operator".
	LoadedBy   string    `json:"loaded_by,omitempty"`
	LoaderKind string    `json:"loader_kind"`
	LoadedAt   time.Time `json:"loaded_at"`
	// ActivatedBy is who made it active (the loader, or the person who
	// approved the proposal; empty for the operator). Activation orders
	// the activations: the active program with the highest one is the one
	// a program id names.
	ActivatedBy string    `json:"activated_by,omitempty"`
	ActivatedAt time.Time `json:"activated_at,omitzero"`
	Activation  int64     `json:"activation,omitempty"`
	// DecidedBy and Reason record a person's decline (Reason also a
	// decline at the proposal's deadline, see DecidedBySystem).
	DecidedBy string `json:"decided_by,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// DecidedBySystem names the part of the system that declined the
	// proposal when no person did, such as DeciderDeadline; DecidedBy is
	// then empty.
	DecidedBySystem string `json:"decided_by_system,omitempty"`
	// Why is the proposer's own reason for proposing it, as it wrote it
	// (see WithWhy); the person deciding reads it on the card.
	Why string `json:"why,omitempty"`
}

// LoadOption configures one LoadProgram.
type LoadOption func(*loadOptions)

type loadOptions struct{ why string }

// WithWhy records why the loader proposes the program, shown to the
// person who decides. It is kept only on a proposal: an active load needs
// no decision. The caller bounds and checks the text.
func WithWhy(why string) LoadOption { return func(o *loadOptions) { o.why = why } }

// Trusted reports whether the program is active: loaded by the operator or
// a person, or by a service holding flow.load, or approved by a person.
func (l *ProgramLoad) Trusted() bool { return l.Status == ProgramActive }

// mayLoad reports whether by's load makes a program active by itself.
func mayLoad(by Principal) bool {
	switch by.Kind {
	case AuthorityHuman:
		return true
	case AuthorityService:
		return slices.Contains(by.Grants, CapabilityFlowLoad)
	}
	return false
}

// AddProgram loads a program as the operator (the embedding application
// or the command line) and stores it, active. Adding the same program
// again is harmless.
func (k *Kernel) AddProgram(ctx context.Context, source []byte) (*Program, error) {
	p, _, err := k.loadProgram(ctx, source, Principal{}, true, loadOptions{})
	return p, err
}

// LoadProgram stores a program for principal by. A person's load, or a
// service's holding the grant flow.load, makes it active at once; any
// other principal's load stores it as proposed, to be approved by a person
// (ApproveProgram) before it starts anything. Loading an active program
// again keeps it active, and a person's or service's reload makes it the
// one its program id names.
func (k *Kernel) LoadProgram(ctx context.Context, source []byte, by Principal, opts ...LoadOption) (*Program, ProgramLoad, error) {
	if err := by.Validate(); err != nil {
		return nil, ProgramLoad{}, err
	}
	var o loadOptions
	for _, f := range opts {
		f(&o)
	}
	return k.loadProgram(ctx, source, by, false, o)
}

func (k *Kernel) loadProgram(ctx context.Context, source []byte, by Principal, operator bool, o loadOptions) (*Program, ProgramLoad, error) {
	p, err := Load(source, k.inv)
	if err != nil {
		return nil, ProgramLoad{}, err
	}
	trusted := operator || mayLoad(by)
	now := k.now().UTC()
	var out ProgramLoad
	err = k.store.Update(ctx, func(tx Tx) error {
		if err := tx.PutProgram(p.Fingerprint(), source); err != nil {
			return err
		}
		// A program stored before keeps its source: the same fingerprint
		// may come with another program_version or spacing, which the
		// kernel then neither shows nor records.
		stored, err := tx.Program(p.Fingerprint())
		if err != nil {
			return err
		}
		if !bytes.Equal(stored, source) {
			fp := p.Fingerprint()
			if p, err = Load(stored, k.inv); err != nil {
				return err
			}
			if p.Fingerprint() != fp {
				return errorf(CodeProgramInvalid, "the stored program %s now loads as %s; the inventory changed", fp, p.Fingerprint())
			}
		}
		cur, err := tx.ProgramLoad(p.Fingerprint())
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if exists && cur.Status == ProgramActive && (operator || !trusted) {
			// Already active: another principal's load changes nothing, and
			// the operator's reload at start keeps its place, so that a
			// person's later choice survives restarts.
			out = cur
			return nil
		}
		l := ProgramLoad{Fingerprint: p.Fingerprint(), ProgramID: p.ID(), Version: p.Version(), LoadedBy: by.ID, LoaderKind: by.Kind, LoadedAt: now, Status: ProgramProposed}
		switch {
		case operator:
			l.LoadedBy, l.LoaderKind = "", LoaderOperator
		case exists && cur.Status == ProgramActive:
			l.LoadedBy, l.LoaderKind, l.LoadedAt = cur.LoadedBy, cur.LoaderKind, cur.LoadedAt
		}
		if !trusted {
			l.Why = o.why
		}
		if trusted {
			// Active, and the one its program id names from now on.
			n, err := nextActivation(tx)
			if err != nil {
				return err
			}
			l.Status, l.ActivatedBy, l.ActivatedAt, l.Activation = ProgramActive, by.ID, now, n
		}
		out = l
		return tx.PutProgramLoad(l)
	})
	if err != nil {
		return nil, ProgramLoad{}, err
	}
	k.mu.Lock()
	k.programs[p.Fingerprint()] = p
	k.mu.Unlock()
	return p, out, nil
}

func nextActivation(tx Tx) (int64, error) {
	loads, err := tx.ProgramLoads()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range loads {
		n = max(n, l.Activation)
	}
	return n + 1, nil
}

// ProgramLoad returns the load record of the program with this
// fingerprint. A stored program without one (stored before loads were
// recorded) is reported as proposed, loaded by nobody known.
func (k *Kernel) ProgramLoad(ctx context.Context, fingerprint string) (ProgramLoad, error) {
	var l ProgramLoad
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		if l, err = tx.ProgramLoad(fingerprint); err == nil {
			return nil
		}
		if _, perr := tx.Program(fingerprint); perr != nil {
			return err
		}
		l, err = ProgramLoad{Fingerprint: fingerprint, Status: ProgramProposed}, nil
		return nil
	})
	if err != nil {
		return ProgramLoad{}, notFound(err, "program", fingerprint)
	}
	if l.ProgramID == "" {
		if p, err := k.Program(ctx, fingerprint); err == nil {
			l.ProgramID, l.Version = p.ID(), p.Version()
		}
	}
	return l, nil
}

// ProgramLoads returns the load records, by fingerprint.
func (k *Kernel) ProgramLoads(ctx context.Context) ([]ProgramLoad, error) {
	var out []ProgramLoad
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		out, err = tx.ProgramLoads()
		return err
	})
	return out, err
}

// ActiveProgram returns the program that a program id names: among the
// active programs with that id, the one activated last (loaded or
// approved by a person, or loaded by the operator). Proposed and declined
// programs are never chosen, so another principal's program with the same
// id changes nothing.
func (k *Kernel) ActiveProgram(ctx context.Context, programID string) (*Program, error) {
	loads, err := k.ProgramLoads(ctx)
	if err != nil {
		return nil, err
	}
	var best *ProgramLoad
	for i := range loads {
		l := &loads[i]
		if l.ProgramID != programID || l.Status != ProgramActive {
			continue
		}
		if best == nil || l.Activation > best.Activation {
			best = l
		}
	}
	if best == nil {
		return nil, errorf(CodeNotFound, "no active program has id %q", programID)
	}
	return k.Program(ctx, best.Fingerprint)
}

// ApproveProgram makes a proposed program active: a person's act. It then
// becomes the program its id names.
func (k *Kernel) ApproveProgram(ctx context.Context, fingerprint string, person Principal) (ProgramLoad, error) {
	return k.decideProgram(ctx, fingerprint, person, func(l *ProgramLoad, tx Tx) error {
		n, err := nextActivation(tx)
		if err != nil {
			return err
		}
		l.Status, l.ActivatedBy, l.ActivatedAt, l.Activation = ProgramActive, person.ID, k.now().UTC(), n
		l.DecidedBy, l.Reason = person.ID, ""
		return nil
	})
}

// DeclineProgram refuses a proposed program; it starts nothing.
func (k *Kernel) DeclineProgram(ctx context.Context, fingerprint string, person Principal, reason string) (ProgramLoad, error) {
	return k.decideProgram(ctx, fingerprint, person, func(l *ProgramLoad, _ Tx) error {
		l.Status, l.DecidedBy, l.Reason = ProgramDeclined, person.ID, truncate(reason, 1024)
		return nil
	})
}

// DeciderDeadline is the system decider that declines a proposed program
// nobody decided before its deadline.
const DeciderDeadline = "deadline"

// DeclineProgramAtDeadline declines a proposed program that no person
// decided before its deadline, recording the decider as DeciderDeadline
// rather than a person. Like a person's decision it is a compare-and-set
// on the proposed status inside the store's transaction: a program
// decided meanwhile, here or on another node, gives CodeApprovalClosed and
// is left as it is.
func (k *Kernel) DeclineProgramAtDeadline(ctx context.Context, fingerprint, reason string) (ProgramLoad, error) {
	return k.settleProgram(ctx, fingerprint, func(l *ProgramLoad, _ Tx) error {
		l.Status, l.DecidedBy, l.DecidedBySystem, l.Reason = ProgramDeclined, "", DeciderDeadline, truncate(reason, 1024)
		return nil
	})
}

func (k *Kernel) decideProgram(ctx context.Context, fingerprint string, person Principal, fn func(*ProgramLoad, Tx) error) (ProgramLoad, error) {
	if err := person.Validate(); err != nil {
		return ProgramLoad{}, err
	}
	if person.Kind != AuthorityHuman {
		return ProgramLoad{}, errorf(CodeCapabilityDenied, "only a person decides on a proposed program; %s is %s", person.ID, person.Kind)
	}
	return k.settleProgram(ctx, fingerprint, fn)
}

// settleProgram applies fn to the load of a proposed program, in one
// store transaction that first checks it is still proposed.
func (k *Kernel) settleProgram(ctx context.Context, fingerprint string, fn func(*ProgramLoad, Tx) error) (ProgramLoad, error) {
	cur, err := k.ProgramLoad(ctx, fingerprint)
	if err != nil {
		return ProgramLoad{}, err
	}
	var out ProgramLoad
	err = k.store.Update(ctx, func(tx Tx) error {
		l := cur
		if stored, err := tx.ProgramLoad(fingerprint); err == nil {
			l = stored
		}
		if l.Status != ProgramProposed {
			return errorf(CodeApprovalClosed, "program %s is %s, not waiting for a decision", fingerprint, l.Status)
		}
		if err := fn(&l, tx); err != nil {
			return err
		}
		out = l
		return tx.PutProgramLoad(l)
	})
	return out, err
}

// requireActive refuses a program that is not active.
func requireActive(tx Tx, fingerprint string) error {
	l, err := tx.ProgramLoad(fingerprint)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return errorf(CodeProgramNotActive, "program %s was not loaded by a person or the operator; a person must load it or approve it before it starts anything", fingerprint)
		}
		return err
	}
	if l.Status != ProgramActive {
		return &Error{Code: CodeProgramNotActive, Message: fmt.Sprintf("program %s (%s) is %s: a person must approve it in the web inbox before it starts anything", l.ProgramID, fingerprint, l.Status)}
	}
	return nil
}
