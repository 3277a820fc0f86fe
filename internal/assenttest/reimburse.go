package assenttest

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/flows"
)

// reimbursementProgram is a program whose one step, a person's approval
// of a reimbursement, takes the amount and the payee as parameters: the
// values a person may change before approving. quorum people must
// approve it.
func reimbursementProgram(id string, quorum int) []byte {
	approval := ""
	if quorum > 1 {
		approval = fmt.Sprintf(`"approval": {"quorum": %d},`, quorum)
	}
	return fmt.Appendf(nil, `{
  "schema_version": 1,
  "program_id": %q,
  "program_version": "1.0.0",
  "requires_runtime": ">=0.1.0",
  "capabilities": {
    "effects": ["state.assign"],
    "verifiers": ["conditions.match"],
    "capability_surface": ["human.approve", "state.write"]
  },
  "owned_resources": [],
  "objective_contracts": [
    {"objective": "reimbursed", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["approved"]}]}
  ],
  "transitions": [
    {
      "id": "approve",
      "selection_class": "PROGRESS",
      "priority": 1,
      "source_phases": ["submitted"],
      "target_phases": ["approved"],
      "authority": ["human"],
      %s
      "parameters": [{"name": "amount", "required": true}, {"name": "payee", "required": true}],
      "assignments": [{"facet": "reimbursement.approval", "value": "person"}],
      "required_capabilities": ["human.approve", "state.write"],
      "effect": "state.assign",
      "verifier": "conditions.match",
      "prescription": {"operation": "reimburse", "expected_postcondition": "a person approved the reimbursement"}
    }
  ]
}`, id, approval)
}

// ReimbursementPayees are the payees a reimbursement may go to, by value,
// with the labels a person reads.
var ReimbursementPayees = []flows.ParameterOption{{Value: "acme-travel", Label: "ACME Travel Ltd"}, {Value: "hotel-lisboa", Label: "Hotel Lisboa"}}

// MaxReimbursement is the largest amount, in EUR, a reimbursement's rule
// accepts, from the agent or from a person's change.
const MaxReimbursement = 2000

// StartReimbursement starts the instance id of a reimbursement, owned by
// the Kit's first agent and waiting for quorum people's approval of its
// amount and payee, which the agent passes when it prescribes (see
// reimbursementProgram). The program shows the amount in EUR and the
// payee by name, and refuses an amount that is not above 0 and at most
// MaxReimbursement.
func (k *Kit) StartReimbursement(id string, quorum int) {
	k.T.Helper()
	ctx := context.Background()
	programID := "reimbursement"
	if quorum > 1 {
		programID = fmt.Sprintf("reimbursement-%d-people", quorum)
	}
	part := k.Srv.Flows()
	p, err := part.Kernel().AddProgram(ctx, reimbursementProgram(programID, quorum))
	if err != nil {
		k.T.Fatal(err)
	}
	part.RegisterParameterInputs(programID, map[string]flows.ParameterInput{
		"amount": {Label: "Amount", Kind: "number", Unit: "EUR", Check: func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 || f > MaxReimbursement {
				return errors.New("a reimbursement is above 0 and at most 2000 EUR")
			}
			return nil
		}},
		"payee": {Label: "Payee", Kind: "select", Options: ReimbursementPayees},
	})
	if _, err := part.Kernel().Start(ctx, flow.Instance{ID: id, Program: p.Fingerprint(), Owner: k.Boot.Agent.ID, Phase: "submitted", Objective: "reimbursed"}); err != nil {
		k.T.Fatal(err)
	}
}
