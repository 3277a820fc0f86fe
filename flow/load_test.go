package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/assent-run/assent/flow/jcs"
)

// setFields lists every set-valued member of full.json, to reverse.
var setFields = []string{
	"capabilities.effects", "capabilities.verifiers", "capabilities.capability_surface", "owned_resources",
	"objective_contracts", "objective_contracts.0.conditions",
	"transitions.0.source_conditions", "transitions.0.source_conditions.0.values", "transitions.0.source_conditions.1.statuses",
	"transitions.0.objectives", "transitions.0.authority", "transitions.0.authority_all", "transitions.0.required_identity",
	"transitions.0.required_evidence", "transitions.0.owned_resources", "transitions.0.parameters", "transitions.0.assignments",
	"transitions.0.interruption.points", "transitions.0.policy.managed_operations",
	"transitions.2.source_phases", "transitions.2.source_conditions.0.statuses",
	"transitions.3.required_capabilities", "transitions.3.source_phases",
}

func TestFingerprintInvariant(t *testing.T) {
	base := fullProgram(t)
	want := mustLoad(t, base)
	tests := []struct {
		name string
		doc  func(t *testing.T) []byte
	}{
		{"compact", func(t *testing.T) []byte { return variant(t, base, func(doc) {}) }},
		{"reversed keys and whitespace", func(t *testing.T) []byte {
			var b bytes.Buffer
			encodeReversed(parseDoc(t, base), "", &b)
			return b.Bytes()
		}},
		{"transition order", func(t *testing.T) []byte { return variant(t, base, func(m doc) { reverse(m, "transitions") }) }},
		{"program_version", func(t *testing.T) []byte {
			return variant(t, base, func(m doc) { set(m, "program_version", "9.9.9-rc.1") })
		}},
		{"satisfied requires_runtime", func(t *testing.T) []byte {
			return variant(t, base, func(m doc) { set(m, "requires_runtime", ">=0.0.0") })
		}},
		{"empty optional members", func(t *testing.T) []byte {
			return variant(t, base, func(m doc) {
				set(m, "transitions.1.objectives", []any{})
				set(m, "transitions.1.authority_all", []any{})
				set(m, "transitions.1.policy", map[string]any{"managed_operations": []any{}})
				set(m, "transitions.1.parameters.0.required", true)
				set(m, "transitions.2.parameters", []any{})
				set(m, "transitions.3.source_conditions", []any{})
			})
		}},
		{"false booleans", func(t *testing.T) []byte {
			return variant(t, base, func(m doc) { set(m, "transitions.0.parameters.1.secret", false) })
		}},
	}
	for _, f := range setFields {
		tests = append(tests, struct {
			name string
			doc  func(t *testing.T) []byte
		}{"set order " + f, func(t *testing.T) []byte { return variant(t, base, func(m doc) { reverse(m, f) }) }})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustLoad(t, tt.doc(t))
			if p.Fingerprint() != want.Fingerprint() {
				t.Errorf("fingerprint changed: %s, want %s\n%s", p.Fingerprint(), want.Fingerprint(), p.Canonical())
			}
		})
	}
}

func TestFingerprintMutations(t *testing.T) {
	base := fullProgram(t)
	orig := mustLoad(t, base).Fingerprint()
	tests := []struct {
		name string
		fn   func(m doc)
	}{
		{"program id", func(m doc) { set(m, "program_id", "order-fulfilment-2") }},
		{"source phase", func(m doc) { set(m, "transitions.1.source_phases", []any{"packed"}) }},
		{"target phase", func(m doc) { set(m, "transitions.1.target_phases", []any{"sent"}) }},
		{"authority", func(m doc) { set(m, "transitions.1.authority", []any{"agent", "service"}) }},
		{"authority_all", func(m doc) { set(m, "transitions.0.authority_all", []any{"policy"}) }},
		{"capability surface", func(m doc) {
			set(m, "capabilities.capability_surface", append(get(m, "capabilities.capability_surface").([]any), "control.write"))
		}},
		{"required capability", func(m doc) { set(m, "transitions.1.required_capabilities", []any{"tool.invoke", "human.approve"}) }},
		{"effect", func(m doc) { set(m, "transitions.0.effect", "tool.call") }},
		{"verifier", func(m doc) { set(m, "transitions.0.verifier", "run.succeeded") }},
		{"objective condition", func(m doc) { set(m, "objective_contracts.0.conditions.0.values", []any{"delivered"}) }},
		{"objective condition status", func(m doc) { set(m, "objective_contracts.0.conditions.1.statuses", []any{"known", "stale"}) }},
		{"recovery reference", func(m doc) { set(m, "transitions.1.interruption.recovery", "escalate") }},
		{"interruption point", func(m doc) { set(m, "transitions.1.interruption.points", []any{"label_printed"}) }},
		{"priority", func(m doc) { set(m, "transitions.0.priority", json.Number("3")) }},
		{"selection class", func(m doc) { set(m, "transitions.0.selection_class", "OBJECTIVE_REQUIRED") }},
		{"assignment value", func(m doc) { set(m, "transitions.0.assignments.0.value", "true") }},
		{"assignment facet", func(m doc) { set(m, "transitions.0.assignments.1.facet", "order.state") }},
		{"prescription arguments order", func(m doc) { reverse(m, "transitions.0.prescription.arguments") }},
		{"prescription operation", func(m doc) { set(m, "transitions.0.prescription.operation", "hold_stock") }},
		{"postcondition", func(m doc) { set(m, "transitions.0.prescription.expected_postcondition", "stock is held") }},
		{"source condition value", func(m doc) { set(m, "transitions.0.source_conditions.0.values", []any{"captured"}) }},
		{"target condition", func(m doc) { set(m, "transitions.0.target_conditions.0.statuses", []any{"known", "stale"}) }},
		{"parameter secret", func(m doc) { set(m, "transitions.0.parameters.1.secret", true) }},
		{"parameter required", func(m doc) { set(m, "transitions.0.parameters.0.required", false) }},
		{"owned resource", func(m doc) { set(m, "transitions.0.owned_resources", []any{"stock"}) }},
		{"objectives", func(m doc) { set(m, "transitions.0.objectives", []any{"shipped"}) }},
		{"identity", func(m doc) { set(m, "transitions.0.required_identity", []any{"order_id"}) }},
		{"evidence", func(m doc) { set(m, "transitions.0.required_evidence", []any{"payment_receipt"}) }},
		{"managed operations", func(m doc) { set(m, "transitions.0.policy.managed_operations", []any{"stock.reserve"}) }},
		{"transition id", func(m doc) {
			set(m, "transitions.3.id", "abort")
		}},
	}
	seen := map[string]string{orig: "original"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Load(variant(t, base, tt.fn), testInventory())
			if err != nil {
				t.Fatalf("mutation is invalid: %v", err)
			}
			if prev, dup := seen[p.Fingerprint()]; dup {
				t.Errorf("fingerprint %s equals that of %s", p.Fingerprint(), prev)
			}
			seen[p.Fingerprint()] = tt.name
		})
	}
}

// TestGolden pins the canonical bytes and fingerprint of each example
// program; a change here changes the identity of every running instance.
func TestGolden(t *testing.T) {
	tests := []struct {
		file, fingerprint string
	}{
		{"../examples/flows/expense-approval.json", "sha256:650a4e95cd7c8e42883e3a6114806c367a12162dd321a168a6d700cc289b5ede"},
		{"../examples/flows/deployment.json", "sha256:606673cbc51a17d3910b49e41b5da983a69c011d07769f3057e68b4cf65569e0"},
		{"testdata/full.json", "sha256:c137323e40ba4c8658681771a4b67df7d0443c2072468506d9d9da377eb57749"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			p := mustLoad(t, readFile(t, tt.file))
			golden := strings.TrimSuffix(tt.file, ".json") + ".canonical.json"
			golden = "testdata/" + golden[strings.LastIndexByte(golden, '/')+1:]
			want := readFile(t, golden)
			if !bytes.Equal(p.Canonical(), want) {
				t.Errorf("canonical bytes differ from %s:\n got %s\nwant %s", golden, p.Canonical(), want)
			}
			if p.Fingerprint() != tt.fingerprint || Fingerprint(want) != tt.fingerprint {
				t.Errorf("fingerprint = %s, want %s", p.Fingerprint(), tt.fingerprint)
			}
			again, err := jcs.Transform(p.Canonical())
			if err != nil || !bytes.Equal(again, p.Canonical()) {
				t.Errorf("canonical bytes are not RFC 8785: %v", err)
			}
		})
	}
}

func TestCanonicalExcludesVersionFields(t *testing.T) {
	p := mustLoad(t, fullProgram(t))
	for _, s := range []string{"schema_version", "program_version", "requires_runtime", "2.3.1", `"reserve"`} {
		if bytes.Contains(p.Canonical(), []byte(s)) {
			t.Errorf("canonical bytes contain %s", s)
		}
	}
	for _, s := range []string{`"id":"order-fulfilment/reserve"`, `"recovery":"order-fulfilment/release"`} {
		if !bytes.Contains(p.Canonical(), []byte(s)) {
			t.Errorf("canonical bytes lack %s", s)
		}
	}
}

func TestRegistryOrder(t *testing.T) {
	p := mustLoad(t, fullProgram(t))
	var ids []string
	for _, tr := range p.Transitions() {
		ids = append(ids, LocalID(tr.ID))
	}
	want := []string{"release", "escalate", "ship", "reserve", "rebuild-index", "cancel", "delivered"}
	if !slices.Equal(ids, want) {
		t.Errorf("registry order = %v, want %v", ids, want)
	}
}

func TestTwoProgramsSameLocalIDs(t *testing.T) {
	base := fullProgram(t)
	a := mustLoad(t, base)
	b := mustLoad(t, variant(t, base, func(m doc) { set(m, "program_id", "other") }))
	for _, tr := range a.Transitions() {
		if _, ok := b.Transition(tr.ID); ok {
			t.Errorf("qualified id %s is shared by two programs", tr.ID)
		}
	}
}

// TestErrorCodes mutates a valid program once per row and checks the first
// error's code and path.
func TestErrorCodes(t *testing.T) {
	base := fullProgram(t)
	tests := []struct {
		name string
		fn   func(m doc)
		code string
		path string
	}{
		{"schema 2", func(m doc) { set(m, "schema_version", json.Number("2")) }, CodeSchemaUnsupported, "schema_version"},
		{"schema 2 with unknown keys", func(m doc) { set(m, "schema_version", json.Number("2")); set(m, "future", true) }, CodeSchemaUnsupported, "schema_version"},
		{"schema 0", func(m doc) { set(m, "schema_version", json.Number("0")) }, CodeProgramInvalid, "schema_version"},
		{"schema negative", func(m doc) { set(m, "schema_version", json.Number("-1")) }, CodeProgramInvalid, "schema_version"},
		{"schema string", func(m doc) { set(m, "schema_version", "1") }, CodeProgramInvalid, "schema_version"},
		{"schema fraction", func(m doc) { set(m, "schema_version", json.Number("1.0")) }, CodeProgramInvalid, "schema_version"},
		{"schema exponent", func(m doc) { set(m, "schema_version", json.Number("1e0")) }, CodeProgramInvalid, "schema_version"},
		{"schema missing", func(m doc) { del(m, "schema_version") }, CodeProgramInvalid, "schema_version"},
		{"runtime too old", func(m doc) { set(m, "requires_runtime", ">=0.2.0") }, CodeRuntimeTooOld, "requires_runtime"},
		{"runtime too old before unknown keys", func(m doc) { set(m, "requires_runtime", ">=1.0.0"); set(m, "future", true) }, CodeRuntimeTooOld, "requires_runtime"},
		{"requires_runtime caret", func(m doc) { set(m, "requires_runtime", "^0.1.0") }, CodeProgramInvalid, "requires_runtime"},
		{"requires_runtime space", func(m doc) { set(m, "requires_runtime", ">= 0.1.0") }, CodeProgramInvalid, "requires_runtime"},
		{"requires_runtime leading zero", func(m doc) { set(m, "requires_runtime", ">=0.01.0") }, CodeProgramInvalid, "requires_runtime"},
		{"program id upper case", func(m doc) { set(m, "program_id", "Orders") }, CodeProgramInvalid, "program_id"},
		{"program id slash", func(m doc) { set(m, "program_id", "../program") }, CodeProgramInvalid, "program_id"},
		{"program id too long", func(m doc) { set(m, "program_id", strings.Repeat("a", 129)) }, CodeProgramInvalid, "program_id"},
		{"program version empty", func(m doc) { set(m, "program_version", "") }, CodeProgramInvalid, "program_version"},
		{"unknown top-level key", func(m doc) { set(m, "requires_human", true) }, CodeProgramInvalid, "requires_human"},
		{"unknown transition key", func(m doc) { set(m, "transitions.1.requires_human", true) }, CodeProgramInvalid, "transitions[1].requires_human"},
		{"unknown condition key", func(m doc) { set(m, "transitions.0.source_conditions.1.value", "x") }, CodeProgramInvalid, "transitions[0].source_conditions[1].value"},
		{"missing owned_resources", func(m doc) { del(m, "owned_resources") }, CodeProgramInvalid, "owned_resources"},
		{"missing capabilities.verifiers", func(m doc) { del(m, "capabilities.verifiers") }, CodeProgramInvalid, "capabilities.verifiers"},
		{"null set", func(m doc) { set(m, "transitions.0.objectives", nil) }, CodeProgramInvalid, "transitions[0].objectives"},
		{"string for set", func(m doc) { set(m, "transitions.1.source_phases", "reserved") }, CodeProgramInvalid, "transitions[1].source_phases"},
		{"number in set", func(m doc) { set(m, "transitions.1.source_phases", []any{json.Number("1")}) }, CodeProgramInvalid, "transitions[1].source_phases[0]"},
		{"priority fraction", func(m doc) { set(m, "transitions.1.priority", json.Number("1.5")) }, CodeProgramInvalid, "transitions[1].priority"},
		{"priority huge", func(m doc) { set(m, "transitions.1.priority", json.Number("99999999999999999999")) }, CodeProgramInvalid, "transitions[1].priority"},
		{"priority zero", func(m doc) { set(m, "transitions.1.priority", json.Number("0")) }, CodeProgramInvalid, "transitions[1].priority"},
		{"assignment without value", func(m doc) { del(m, "transitions.0.assignments.0.value") }, CodeProgramInvalid, "transitions[0].assignments[0].value"},
		{"empty effect", func(m doc) { set(m, "transitions.1.effect", "") }, CodeProgramInvalid, "transitions[1].effect"},
		{"duplicate effect", func(m doc) {
			set(m, "capabilities.effects", append(get(m, "capabilities.effects").([]any), "tool.call"))
		}, CodeProgramInvalid, "capabilities.effects[3]"},
		{"unknown effect", func(m doc) {
			set(m, "capabilities.effects", append(get(m, "capabilities.effects").([]any), "mail.send"))
		}, CodeProgramInvalid, "capabilities.effects[3]"},
		{"unknown verifier", func(m doc) {
			set(m, "capabilities.verifiers", append(get(m, "capabilities.verifiers").([]any), "oracle"))
		}, CodeProgramInvalid, "capabilities.verifiers[2]"},
		{"unknown capability", func(m doc) {
			set(m, "capabilities.capability_surface", append(get(m, "capabilities.capability_surface").([]any), "production.nuke"))
		}, CodeProgramInvalid, "capabilities.capability_surface[4]"},
		{"bad resource id", func(m doc) { set(m, "owned_resources", []any{"stock", "Orders"}) }, CodeProgramInvalid, "owned_resources[1]"},
		{"no objective contracts", func(m doc) { set(m, "objective_contracts", []any{}) }, CodeProgramInvalid, "objective_contracts"},
		{"duplicate objective", func(m doc) { set(m, "objective_contracts.1.objective", "shipped") }, CodeProgramInvalid, "objective_contracts[1].objective"},
		{"objective without conditions", func(m doc) { set(m, "objective_contracts.1.conditions", []any{}) }, CodeProgramInvalid, "objective_contracts[1].conditions"},
		{"bad status", func(m doc) { set(m, "objective_contracts.1.conditions.0.statuses", []any{"present"}) }, CodeProgramInvalid, "objective_contracts[1].conditions[0].statuses[0]"},
		{"duplicate condition", func(m doc) {
			set(m, "objective_contracts.0.conditions", append(get(m, "objective_contracts.0.conditions").([]any), get(m, "objective_contracts.0.conditions.1")))
		}, CodeProgramInvalid, "objective_contracts[0].conditions[2]"},
		{"no transitions", func(m doc) { set(m, "transitions", []any{}) }, CodeProgramInvalid, "transitions"},
		{"duplicate transition", func(m doc) { set(m, "transitions.3.id", "ship") }, CodeProgramInvalid, "transitions[3].id"},
		{"transition id with slash", func(m doc) { set(m, "transitions.3.id", "other/cancel") }, CodeProgramInvalid, "transitions[3].id"},
		{"selection class", func(m doc) { set(m, "transitions.1.selection_class", "PROGRAM_RECOVERY") }, CodeProgramInvalid, "transitions[1].selection_class"},
		{"no source phases", func(m doc) { set(m, "transitions.1.source_phases", []any{}) }, CodeProgramInvalid, "transitions[1].source_phases"},
		{"duplicate phase", func(m doc) { set(m, "transitions.2.source_phases", []any{"new", "reserved", "new"}) }, CodeProgramInvalid, "transitions[2].source_phases[2]"},
		{"bad phase name", func(m doc) { set(m, "transitions.1.target_phases", []any{"SHIPPED"}) }, CodeProgramInvalid, "transitions[1].target_phases[0]"},
		{"objective without contract", func(m doc) { set(m, "transitions.0.objectives", []any{"shipped", "returned"}) }, CodeProgramInvalid, "transitions[0].objectives[1]"},
		{"no authority", func(m doc) { set(m, "transitions.1.authority", []any{}) }, CodeProgramInvalid, "transitions[1].authority"},
		{"unknown authority", func(m doc) { set(m, "transitions.1.authority", []any{"autonomy"}) }, CodeProgramInvalid, "transitions[1].authority[0]"},
		{"undeclared resource", func(m doc) { set(m, "transitions.1.owned_resources", []any{"trucks"}) }, CodeProgramInvalid, "transitions[1].owned_resources[0]"},
		{"duplicate parameter", func(m doc) { set(m, "transitions.0.parameters.1.name", "warehouse") }, CodeProgramInvalid, "transitions[0].parameters[1].name"},
		{"phase in source condition", func(m doc) { set(m, "transitions.0.source_conditions.1.facet", "phase") }, CodeProgramInvalid, "transitions[0].source_conditions[1].facet"},
		{"condition without statuses", func(m doc) { set(m, "transitions.0.source_conditions.1.statuses", []any{}) }, CodeProgramInvalid, "transitions[0].source_conditions[1].statuses"},
		{"duplicate value", func(m doc) {
			set(m, "transitions.0.source_conditions.0.values", []any{"captured", "captured"})
		}, CodeProgramInvalid, "transitions[0].source_conditions[0].values[1]"},
		{"duplicate assignment", func(m doc) { set(m, "transitions.0.assignments.1.facet", "stock.reserved") }, CodeProgramInvalid, "transitions[0].assignments[1].facet"},
		{"phase assignment", func(m doc) { set(m, "transitions.0.assignments.1.facet", "phase") }, CodeProgramInvalid, "transitions[0].assignments[1].facet"},
		{"no required capabilities", func(m doc) { set(m, "transitions.1.required_capabilities", []any{}) }, CodeProgramInvalid, "transitions[1].required_capabilities"},
		{"required capability outside surface", func(m doc) {
			set(m, "transitions.1.required_capabilities", []any{"tool.invoke", "control.write"})
		}, CodeProgramInvalid, "transitions[1].required_capabilities[1]"},
		{"unknown required capability", func(m doc) {
			set(m, "transitions.1.required_capabilities", []any{"tool.invoke", "wire.transfer"})
		}, CodeProgramInvalid, "transitions[1].required_capabilities[1]"},
		{"duplicate required capability", func(m doc) {
			set(m, "transitions.1.required_capabilities", []any{"tool.invoke", "tool.invoke"})
		}, CodeProgramInvalid, "transitions[1].required_capabilities[1]"},
		{"kernel minimum outside surface", func(m doc) {
			set(m, "capabilities.capability_surface", []any{"state.write", "command.execute", "human.approve"})
			set(m, "transitions.1.required_capabilities", []any{"state.write"})
		}, CodeProgramInvalid, "transitions[1].effect"},
		{"missing effect", func(m doc) { del(m, "transitions.1.effect") }, CodeProgramInvalid, "transitions[1].effect"},
		{"undeclared effect", func(m doc) { set(m, "transitions.1.effect", "control.apply") }, CodeProgramInvalid, "transitions[1].effect"},
		{"observed with effect", func(m doc) { set(m, "transitions.5.effect", "state.assign") }, CodeProgramInvalid, "transitions[5].effect"},
		{"observed with prescription", func(m doc) {
			set(m, "transitions.5.prescription", map[string]any{"operation": "x", "expected_postcondition": "y"})
		}, CodeProgramInvalid, "transitions[5].prescription"},
		{"state.assign with two target phases", func(m doc) { set(m, "transitions.3.target_phases", []any{"cancelled", "void"}) }, CodeProgramInvalid, "transitions[3].target_phases"},
		{"missing verifier", func(m doc) { del(m, "transitions.1.verifier") }, CodeProgramInvalid, "transitions[1].verifier"},
		{"undeclared verifier", func(m doc) {
			set(m, "capabilities.verifiers", []any{"conditions.match"})
		}, CodeProgramInvalid, "transitions[4].verifier"},
		{"missing prescription", func(m doc) { del(m, "transitions.1.prescription") }, CodeProgramInvalid, "transitions[1].prescription"},
		{"bad operation", func(m doc) { set(m, "transitions.1.prescription.operation", "Create Label") }, CodeProgramInvalid, "transitions[1].prescription.operation"},
		{"empty postcondition", func(m doc) { set(m, "transitions.1.prescription.expected_postcondition", "") }, CodeProgramInvalid, "transitions[1].prescription.expected_postcondition"},
		{"recovery not RECOVERY", func(m doc) { set(m, "transitions.1.interruption.recovery", "cancel") }, CodeProgramInvalid, "transitions[1].interruption.recovery"},
		{"recovery unknown", func(m doc) { set(m, "transitions.1.interruption.recovery", "undo") }, CodeProgramInvalid, "transitions[1].interruption.recovery"},
		{"no interruption points", func(m doc) { set(m, "transitions.1.interruption.points", []any{}) }, CodeProgramInvalid, "transitions[1].interruption.points"},
		{"bad managed operation", func(m doc) { set(m, "transitions.0.policy.managed_operations", []any{"Stock"}) }, CodeProgramInvalid, "transitions[0].policy.managed_operations[0]"},
		{"unused effect", func(m doc) {
			set(m, "transitions.4.effect", "tool.call")
			set(m, "transitions.4.required_capabilities", []any{"tool.invoke"})
		}, CodeProgramInvalid, "capabilities.effects[2]"},
		{"unused verifier", func(m doc) { set(m, "transitions.4.verifier", "conditions.match") }, CodeProgramInvalid, "capabilities.verifiers[1]"},
		{"unused resource", func(m doc) {
			set(m, "owned_resources", []any{"stock", "orders", "trucks"})
		}, CodeProgramInvalid, "owned_resources[2]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(variant(t, base, tt.fn), testInventory())
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("Load succeeded or returned %T, want %s at %s", err, tt.code, tt.path)
			}
			if list[0].Code != tt.code || list[0].Path != tt.path {
				t.Errorf("first error = %v, want %s at %s", list[0], tt.code, tt.path)
			}
			if list[0].Message == "" {
				t.Error("empty message")
			}
		})
	}
}

func TestDecoderRejects(t *testing.T) {
	base := fullProgram(t)
	tests := []struct {
		name string
		doc  []byte
		path string
	}{
		{"empty", []byte(""), ""},
		{"not an object", []byte(`[{"schema_version":1}]`), ""},
		{"trailing object", append(slices.Clone(base), " {}"...), ""},
		{"trailing garbage", append(slices.Clone(base), "x"...), ""},
		{"duplicate top key", []byte(`{"program_id":"a","program_id":"b"}`), "program_id"},
		{"duplicate nested key", bytes.Replace(base, []byte(`"id": "ship",`), []byte(`"id": "ship", "id": "ship",`), 1), "transitions[1].id"},
		{"invalid UTF-8", bytes.Replace(base, []byte(`"stock is reserved"`), []byte("\"stock \xff reserved\""), 1), ""},
		{"BOM", append([]byte("\xef\xbb\xbf"), base...), ""},
		{"too deep", []byte(`{"future":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`), ""},
		{"too deep where a string belongs", []byte(`{"program_id":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`), "program_id"},
		{"deep but within the limit where a string belongs", []byte(`{"schema_version":1,"program_id":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}`), "program_id"},
		{"too large", append([]byte(`{"program_id":"`), append(bytes.Repeat([]byte("a"), MaxDocumentSize), `"}`...)...), ""},
		{"truncated", base[:len(base)/2], ""},
		{"case variant key", bytes.Replace(base, []byte(`"program_id"`), []byte(`"Program_ID"`), 1), "program_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.doc, testInventory())
			if ErrorCode(err) != CodeProgramInvalid {
				t.Fatalf("err = %v, want PROGRAM_INVALID", err)
			}
			if tt.path != "" {
				var list ErrorList
				errors.As(err, &list)
				if list[0].Path != tt.path {
					t.Errorf("path = %q, want %q (%v)", list[0].Path, tt.path, list[0])
				}
			}
		})
	}
}

func TestRuntimeVersions(t *testing.T) {
	base := fullProgram(t)
	tests := []struct {
		runtime, requires string
		code              string
	}{
		{"0.1.0", ">=0.1.0", ""},
		{"v0.1.0", ">=0.1.0", ""},
		{"0.1.0-dev", ">=0.1.0", CodeRuntimeTooOld},
		{"0.1.1-rc.1", ">=0.1.0", ""},
		{"1.0.0", ">=0.9.99", ""},
		{"0.10.0", ">=0.9.0", ""},
		{"0.1.0", ">=0.1.1", CodeRuntimeTooOld},
		{"0.1", ">=0.1.0", CodeProgramInvalid},
		{"0.1.0+build", ">=0.1.0", CodeProgramInvalid},
		{"01.1.0", ">=0.1.0", CodeProgramInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.runtime+" "+tt.requires, func(t *testing.T) {
			_, err := Load(variant(t, base, func(m doc) { set(m, "requires_runtime", tt.requires) }), NewInventory(tt.runtime))
			if got := ErrorCode(err); got != tt.code {
				t.Errorf("code = %q, want %q (%v)", got, tt.code, err)
			}
		})
	}
}

func TestInventoryExtension(t *testing.T) {
	base := fullProgram(t)
	doc := variant(t, base, func(m doc) {
		set(m, "capabilities.capability_surface", append(get(m, "capabilities.capability_surface").([]any), "ledger.post"))
		set(m, "transitions.1.required_capabilities", []any{"tool.invoke", "ledger.post"})
	})
	if ErrorCode(func() error { _, err := Load(doc, testInventory()); return err }()) != CodeProgramInvalid {
		t.Fatal("unknown application capability accepted")
	}
	inv := testInventory()
	if err := inv.RegisterCapability("ledger.post"); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(doc, inv); err != nil {
		t.Fatalf("after RegisterCapability: %v", err)
	}
	if err := inv.RegisterEffect("tool.call", "other.minimum", nil); err == nil {
		t.Error("changing a built-in effect's minimum was accepted")
	}
	if err := inv.RegisterEffect("Bad", "x", nil); err == nil {
		t.Error("bad effect name accepted")
	}
	if err := inv.RegisterEffect("mail.send", "mail.write", nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(inv.Capabilities(), "mail.write") || !slices.Contains(inv.Effects(), "mail.send") {
		t.Error("registered effect or its minimum is missing from the inventory")
	}
}

func TestErrorsCollected(t *testing.T) {
	doc := variant(t, fullProgram(t), func(m doc) {
		set(m, "transitions.1.priority", json.Number("0"))
		set(m, "transitions.2.authority", []any{"root"})
	})
	_, err := Load(doc, testInventory())
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
	if list[0].Path != "transitions[1].priority" || list[1].Path != "transitions[2].authority[0]" {
		t.Errorf("errors out of document order: %v", list)
	}
	if !strings.Contains(err.Error(), "and 1 more") {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestLoadNilInventory(t *testing.T) {
	if _, err := Load(fullProgram(t), nil); ErrorCode(err) != CodeProgramInvalid {
		t.Errorf("err = %v", err)
	}
}

func TestProgramAccessorsCopy(t *testing.T) {
	p := mustLoad(t, fullProgram(t))
	c := p.Canonical()
	c[0] = 'x'
	ts := p.Transitions()
	ts[0].SourcePhases[0] = "mutated"
	m := p.Manifest()
	m.Capabilities.Effects[0] = "mutated"
	if p.Canonical()[0] != '{' || p.Transitions()[0].SourcePhases[0] == "mutated" || p.Manifest().Capabilities.Effects[0] == "mutated" {
		t.Error("a returned value aliases the program")
	}
	if tr, ok := p.Transition("ship"); !ok || tr.ID != "order-fulfilment/ship" {
		t.Errorf("Transition(local) = %v, %v", tr.ID, ok)
	}
	if p.ID() != "order-fulfilment" || p.Version() != "2.3.1" || p.RequiresRuntime() != ">=0.1.0" || p.Len() != 7 {
		t.Error("accessors disagree with the document")
	}
}

func FuzzLoad(f *testing.F) {
	// Seeds stay small: the fuzzer minimizes every new interesting input,
	// which takes long on documents of several kilobytes.
	if data, err := readFileOK("testdata/minimal.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`{"schema_version":1,"program_id":"p","program_version":"1","requires_runtime":">=0.1.0","capabilities":{"effects":["state.assign"],"verifiers":["conditions.match"],"capability_surface":["state.write"]},"objective_contracts":[{"objective":"o","conditions":[{"facet":"phase","statuses":["known"],"values":["b"]}]}],"transitions":[{"id":"t","selection_class":"PROGRESS","priority":1,"source_phases":["a"],"target_phases":["b"],"authority":["human"],"approval":{"quorum":2,"group":"finance"},"required_capabilities":["state.write"],"effect":"state.assign","verifier":"conditions.match","prescription":{"operation":"go","expected_postcondition":"b"}}]}`))
	f.Add([]byte(`{"schema_version":1,"program_id":"p","program_version":"1","requires_runtime":">=0.1.0","capabilities":{"effects":["state.assign"],"verifiers":["conditions.match"],"capability_surface":["state.write"]},"objective_contracts":[{"objective":"o","conditions":[{"facet":"phase","statuses":["known"],"values":["b"]}]}],"transitions":[{"id":"t","selection_class":"PROGRESS","priority":1,"source_phases":["a"],"target_phases":["b"],"authority":["human"],"approval":{"deadline_seconds":2,"fallback":"decline","escalate_to":"heads","group":"finance"},"required_capabilities":["state.write"],"effect":"state.assign","verifier":"conditions.match","prescription":{"operation":"go","expected_postcondition":"b"}}]}`))
	f.Add([]byte(`{"schema_version":1,"program_id":"p","program_version":"1","requires_runtime":">=0.1.0","capabilities":{"effects":["state.assign"],"verifiers":["conditions.match"],"capability_surface":["state.write"]},"objective_contracts":[{"objective":"o","conditions":[{"facet":"phase","statuses":["known"],"values":["b"]}]}],"transitions":[{"id":"t","selection_class":"PROGRESS","priority":1,"source_phases":["a"],"target_phases":["b"],"authority":["human"],"approval":{"deadline_seconds":0,"fallback":"wait"},"required_capabilities":["state.write"],"effect":"state.assign","verifier":"conditions.match","prescription":{"operation":"go","expected_postcondition":"b"}}]}`))
	f.Add([]byte(`{"schema_version":1}`))
	f.Add([]byte(`{"schema_version":2,"x":[1,2]}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte("\"\xff\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Load(data, testInventory())
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is not a non-empty ErrorList: %v", err)
			}
			for _, e := range list {
				switch e.Code {
				case CodeProgramInvalid, CodeSchemaUnsupported, CodeRuntimeTooOld:
				default:
					t.Fatalf("unexpected code %s", e.Code)
				}
			}
			return
		}
		c := p.Canonical()
		again, err := jcs.Transform(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("canonical bytes are not JCS: %v\n%s", err, c)
		}
		if p.Fingerprint() != Fingerprint(c) {
			t.Fatal("fingerprint does not hash the canonical bytes")
		}
		// Loading the same program again yields the same fingerprint.
		if q := mustLoad(t, data); q.Fingerprint() != p.Fingerprint() {
			t.Fatal("fingerprint is not deterministic")
		}
	})
}

// FuzzValidate starts from a valid program and lets the fuzzer change one
// string of it, which exercises the validator rather than the decoder.
func FuzzValidate(f *testing.F) {
	f.Add(0, "reserved")
	f.Add(3, "human.approve")
	f.Add(17, "")
	f.Add(40, "run.spawn")
	f.Add(8, "ship")
	base, err := readFileOK("testdata/full.json")
	if err != nil {
		f.Skip("testdata/full.json is not available")
	}
	f.Fuzz(func(t *testing.T, which int, s string) {
		m := parseDoc(t, base)
		var strs []*string
		var walk func(v any, assign func(any))
		walk = func(v any, assign func(any)) {
			switch x := v.(type) {
			case map[string]any:
				for _, k := range sortedKeys(x) {
					walk(x[k], func(nv any) { x[k] = nv })
				}
			case []any:
				for i := range x {
					walk(x[i], func(nv any) { x[i] = nv })
				}
			case string:
				// Replace the string by a pointer the fuzzer can overwrite;
				// json.Marshal encodes *string as a string.
				s := x
				strs = append(strs, &s)
				assign(&s)
			}
		}
		walk(any(m), func(any) {})
		if len(strs) == 0 {
			return
		}
		if which < 0 {
			which = -which
		}
		*strs[which%len(strs)] = s
		out, err := json.Marshal(m)
		if err != nil {
			return
		}
		p, err := Load(out, testInventory())
		if err != nil {
			if ErrorCode(err) == "" {
				t.Fatalf("error without code: %v", err)
			}
			return
		}
		if _, err := jcs.Transform(p.Canonical()); err != nil {
			t.Fatalf("canonical bytes do not parse: %v", err)
		}
	})
}

func readFileOK(name string) ([]byte, error) { return osReadFile(name) }

// TestUpstreamManifestRefused loads the upstream ABI's example manifest
// (schema_version 5, another vocabulary): it must be refused as an
// unsupported schema, before its unknown keys are looked at.
func TestUpstreamManifestRefused(t *testing.T) {
	data := readFile(t, "../../shared/research/boatstack-abi-vectors/manifest-example.json")
	_, err := Load(data, testInventory())
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 || list[0].Code != CodeSchemaUnsupported || list[0].Path != "schema_version" {
		t.Errorf("err = %v, want one PROGRAM_SCHEMA_UNSUPPORTED at schema_version", err)
	}
	// With schema 1 the next gate is the runtime minimum, then the shape.
	downgraded := variant(t, data, func(m doc) { set(m, "schema_version", json.Number("1")) })
	if _, err := Load(downgraded, testInventory()); ErrorCode(err) != CodeRuntimeTooOld {
		t.Errorf("schema 1 requiring >=1.0.0: %v, want RUNTIME_TOO_OLD", err)
	}
	downgraded = variant(t, downgraded, func(m doc) { set(m, "requires_runtime", ">=0.1.0") })
	if _, err := Load(downgraded, testInventory()); ErrorCode(err) != CodeProgramInvalid {
		t.Errorf("schema 1 with the upstream vocabulary: %v, want PROGRAM_INVALID", err)
	}
}

func TestFingerprintStreamsLargePrograms(t *testing.T) {
	p := mustLoad(t, genProgram(200))
	if Fingerprint(p.Canonical()) != p.Fingerprint() {
		t.Error("the streamed fingerprint differs from the hash of Canonical")
	}
}
