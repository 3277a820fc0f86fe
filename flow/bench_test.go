package flow

import (
	"fmt"
	"strings"
	"testing"
)

// genProgram writes a program of n transitions that uses every transition
// key: a chain of phases s0 → s1 → … with conditions, parameters,
// assignments, interruption and policy.
func genProgram(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"schema_version":1,"program_id":"bench.chain","program_version":"1","requires_runtime":">=0.1.0",
"capabilities":{"effects":["state.assign","tool.call"],"verifiers":["conditions.match"],"capability_surface":["state.write","tool.invoke","human.approve"]},
"owned_resources":["ledger","queue"],
"objective_contracts":[{"objective":"done","conditions":[{"facet":"phase","statuses":["known"],"values":["s` + fmt.Sprint(n) + `"]}]}],
"transitions":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		effect, caps := "state.assign", `"state.write"`
		if i%2 == 1 {
			effect, caps = "tool.call", `"tool.invoke","human.approve"`
		}
		fmt.Fprintf(&b, `
{"id":"step-%[1]d","selection_class":"PROGRESS","priority":%[3]d,"source_phases":["s%[1]d","s%[1]d_retry"],"target_phases":["s%[2]d"],
 "objectives":["done"],"authority":["agent","human"],"authority_all":["agent"],"required_identity":["customer_id","order_id"],
 "required_evidence":["receipt","snapshot"],"owned_resources":["queue","ledger"],
 "parameters":[{"name":"reference","required":true},{"name":"token","secret":true},{"name":"note"}],
 "source_conditions":[{"facet":"ledger.balance","statuses":["known","stale"],"values":["ok","low"]},{"facet":"queue.depth","statuses":["known"]}],
 "target_conditions":[{"facet":"step.s%[2]d","statuses":["known"],"values":["done"]}],
 "assignments":[{"facet":"step.s%[2]d","value":"done"},{"facet":"audit.last","value":"step-%[1]d"}],
 "required_capabilities":[%[4]s],"effect":"%[5]s","verifier":"conditions.match",
 "prescription":{"operation":"run_step","arguments":["--step","%[1]d","--strict"],"expected_postcondition":"step %[1]d is done"},
 "interruption":{"points":["after_write","before_commit"],"recovery":"recover"},
 "policy":{"managed_operations":["ledger.write","queue.pop"]}}`, i, i+1, i%7+1, caps, effect)
	}
	b.WriteString(`,
{"id":"recover","selection_class":"RECOVERY","priority":1,"source_phases":["s0"],"target_phases":["s0"],"authority":["human"],
 "source_conditions":[{"facet":"ledger.balance","statuses":["conflicting"]}],"assignments":[{"facet":"ledger.balance","value":"ok"}],
 "required_capabilities":["state.write"],"effect":"state.assign","verifier":"conditions.match",
 "prescription":{"operation":"reconcile","expected_postcondition":"the ledger agrees"}}]}`)
	return []byte(b.String())
}

func TestGenProgramIsValid(t *testing.T) {
	for _, n := range []int{2, 10} {
		if _, err := Load(genProgram(n), testInventory()); err != nil {
			t.Fatalf("genProgram(%d): %v", n, err)
		}
	}
}

// BenchmarkLoad measures decode + validate + normalize + fingerprint and
// reports the cost per transition.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		data := genProgram(n)
		inv := testInventory()
		b.Run(fmt.Sprintf("transitions=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				if _, err := Load(data, inv); err != nil {
					b.Fatal(err)
				}
			}
			per := float64(b.N) * float64(n+1) * 1000
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "µs/transition")
			if c := cpuTime() - cpu; c > 0 {
				b.ReportMetric(float64(c.Nanoseconds())/per, "cpu-µs/transition")
			}
		})
	}
}

// BenchmarkResolve measures one decision on full.json, from an instance
// that yields a prescription.
func BenchmarkResolve(b *testing.B) {
	p := mustLoad(b, fullProgram(b))
	inv := testInventory()
	in := newOrder(p)
	pr := agent(CapabilityStateWrite)
	pr.Policy = true
	req := Request{Parameters: map[string]string{"warehouse": "north"}}
	if d := Resolve(p, inv, &in, &pr, req, t0); d.Kind != Prescribed {
		b.Fatalf("decision = %s", d.Kind)
	}
	b.ReportAllocs()
	for b.Loop() {
		Resolve(p, inv, &in, &pr, req, t0)
	}
}

// BenchmarkResolveLarge resolves on a 1,000-transition program.
func BenchmarkResolveLarge(b *testing.B) {
	p := mustLoad(b, genProgram(1000))
	inv := testInventory()
	in := Instance{ID: "i", Program: p.Fingerprint(), Phase: "s500", Objective: "done",
		Facts: map[string]Fact{"ledger.balance": known("ok"), "queue.depth": known("3")}}
	pr := agent(CapabilityStateWrite)
	req := Request{Parameters: map[string]string{"reference": "r"}}
	if d := Resolve(p, inv, &in, &pr, req, t0); d.Kind != Prescribed {
		b.Fatalf("decision = %s %s", d.Kind, d.Message)
	}
	b.ReportAllocs()
	for b.Loop() {
		Resolve(p, inv, &in, &pr, req, t0)
	}
}

// BenchmarkDecode measures the strict decoder alone on 100 transitions.
func BenchmarkDecode(b *testing.B) {
	data := genProgram(100)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, fatal, shape := decodeManifest(data); fatal != nil || len(shape) > 0 {
			b.Fatal(fatal, shape)
		}
	}
}
