// Package flowtest holds Control Programs that tests and benchmarks of
// several packages run.
package flowtest

// Toggle moves an instance between the phases off and on forever, so that
// every step prescribes and applies one transition (state.assign, checked
// by conditions.match, needing state.write). Start instances in phase off
// with objective "never", which is never met.
const Toggle = `{
  "schema_version": 1, "program_id": "toggle", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "never", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["nowhere"]}]}],
  "transitions": [
    {"id": "on", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["off"], "target_phases": ["on"], "authority": ["agent"],
     "assignments": [{"facet": "light", "value": "on"}], "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "switch_on", "expected_postcondition": "on"}},
    {"id": "off", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["on"], "target_phases": ["off"], "authority": ["agent"],
     "assignments": [{"facet": "light", "value": "off"}], "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
     "prescription": {"operation": "switch_off", "expected_postcondition": "off"}}
  ]
}`
