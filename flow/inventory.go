package flow

import (
	"fmt"
	"slices"
	"sync"
)

// Built-in effect, verifier and capability names of the runtime inventory.
const (
	EffectStateAssign  = "state.assign"
	EffectRunSpawn     = "run.spawn"
	EffectToolCall     = "tool.call"
	EffectControlApply = "control.apply"

	VerifierConditionsMatch = "conditions.match"
	VerifierRunSucceeded    = "run.succeeded"

	CapabilityStateWrite     = "state.write"
	CapabilityCommandExecute = "command.execute"
	CapabilityToolInvoke     = "tool.invoke"
	CapabilityControlWrite   = "control.write"
	CapabilityHumanApprove   = "human.approve"
)

// Inventory is what a runtime provides to programs: its version, the effects
// it can run (each with the kernel-owned minimum capability that running it
// requires), the verifiers it can check and the capabilities it knows. A
// program that names anything outside the inventory is refused.
//
// NewInventory returns the built-in inventory; applications extend it with
// the Register methods, normally once at start-up. An Inventory is safe for
// concurrent use.
type Inventory struct {
	mu           sync.RWMutex
	version      string
	effects      map[string]effectDef
	verifiers    map[string]Verifier
	capabilities map[string]bool
}

type effectDef struct {
	minimum string
	impl    Effect
	binder  Binder
}

// NewInventory returns the built-in inventory of a runtime at version
// (MAJOR.MINOR.PATCH): effects state.assign (minimum state.write, built in),
// run.spawn (command.execute), tool.call (tool.invoke) and control.apply
// (control.write), the last three without an implementation until the
// application registers one; verifiers conditions.match and run.succeeded;
// capabilities the four minimums and human.approve.
func NewInventory(version string) *Inventory {
	inv := &Inventory{
		version:      version,
		effects:      make(map[string]effectDef),
		verifiers:    make(map[string]Verifier),
		capabilities: make(map[string]bool),
	}
	inv.effects[EffectStateAssign] = effectDef{minimum: CapabilityStateWrite, impl: EffectFunc(assignState)}
	inv.effects[EffectRunSpawn] = effectDef{minimum: CapabilityCommandExecute}
	inv.effects[EffectToolCall] = effectDef{minimum: CapabilityToolInvoke}
	inv.effects[EffectControlApply] = effectDef{minimum: CapabilityControlWrite}
	inv.verifiers[VerifierConditionsMatch] = VerifierFunc(verifyConditions)
	inv.verifiers[VerifierRunSucceeded] = VerifierFunc(verifyRunSucceeded)
	for _, c := range []string{CapabilityStateWrite, CapabilityCommandExecute, CapabilityToolInvoke, CapabilityControlWrite, CapabilityHumanApprove} {
		inv.capabilities[c] = true
	}
	return inv
}

// Version returns the runtime version programs are checked against.
func (inv *Inventory) Version() string { return inv.version }

// RegisterEffect adds an effect, or wires the implementation of a known one.
// minimum is the capability the kernel requires of every transition using
// the effect; it becomes a known capability. A known effect keeps its
// minimum: registering it with another one is an error.
func (inv *Inventory) RegisterEffect(name, minimum string, e Effect) error {
	if !isID(name) {
		return fmt.Errorf("flow: effect name %q is not an id", name)
	}
	if !isID(minimum) {
		return fmt.Errorf("flow: minimum capability %q of effect %q is not an id", minimum, name)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if old, ok := inv.effects[name]; ok && old.minimum != minimum {
		return fmt.Errorf("flow: effect %q has kernel minimum %q; it cannot be registered with %q", name, old.minimum, minimum)
	}
	def := effectDef{minimum: minimum, impl: e, binder: inv.effects[name].binder}
	if b, ok := e.(Binder); ok {
		def.binder = b
	}
	inv.effects[name] = def
	inv.capabilities[minimum] = true
	return nil
}

// RegisterBinder sets how a known effect tells, before it runs, what it
// would act on (see Binder); approvals of its transitions bind that.
func (inv *Inventory) RegisterBinder(effect string, b Binder) error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	d, ok := inv.effects[effect]
	if !ok {
		return fmt.Errorf("flow: no effect %q to bind", effect)
	}
	d.binder = b
	inv.effects[effect] = d
	return nil
}

// RegisterVerifier adds a verifier or replaces the implementation of one.
func (inv *Inventory) RegisterVerifier(name string, v Verifier) error {
	if !isID(name) {
		return fmt.Errorf("flow: verifier name %q is not an id", name)
	}
	if v == nil {
		return fmt.Errorf("flow: verifier %q has no implementation", name)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.verifiers[name] = v
	return nil
}

// RegisterCapability adds an application capability to the known
// vocabulary.
func (inv *Inventory) RegisterCapability(name string) error {
	if !isID(name) {
		return fmt.Errorf("flow: capability %q is not an id", name)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.capabilities[name] = true
	return nil
}

// Minimum returns the kernel minimum capability of an effect.
func (inv *Inventory) Minimum(effect string) (string, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	d, ok := inv.effects[effect]
	return d.minimum, ok
}

// Effects returns the known effect names, sorted.
func (inv *Inventory) Effects() []string {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return sortedKeys(inv.effects)
}

// Verifiers returns the known verifier names, sorted.
func (inv *Inventory) Verifiers() []string {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return sortedKeys(inv.verifiers)
}

// Capabilities returns the known capabilities, sorted.
func (inv *Inventory) Capabilities() []string {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return sortedKeys(inv.capabilities)
}

func (inv *Inventory) effect(name string) (effectDef, bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	d, ok := inv.effects[name]
	return d, ok
}

func (inv *Inventory) verifier(name string) Verifier {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.verifiers[name]
}

// snapshot copies the name sets, so that validation of one program sees a
// consistent inventory without holding the lock.
func (inv *Inventory) snapshot() inventoryView {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	v := inventoryView{
		minimums:     make(map[string]string, len(inv.effects)),
		verifiers:    make(map[string]bool, len(inv.verifiers)),
		capabilities: make(map[string]bool, len(inv.capabilities)),
	}
	for k, d := range inv.effects {
		v.minimums[k] = d.minimum
	}
	for k := range inv.verifiers {
		v.verifiers[k] = true
	}
	for k := range inv.capabilities {
		v.capabilities[k] = true
	}
	return v
}

type inventoryView struct {
	minimums     map[string]string
	verifiers    map[string]bool
	capabilities map[string]bool
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
