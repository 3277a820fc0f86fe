package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/examples"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// DemoExpenseID is the demo expense instance.
const DemoExpenseID = "expense-1001"

// DemoPayeeIBAN is the payee of the demo expenses.
const DemoPayeeIBAN = "PT50000201231234567891234"

// demoPayment is one payment the demo payments_send tool recorded. The
// IBAN is kept only as its last four characters.
type demoPayment struct {
	Instance  string    `json:"instance_id"`
	Reference string    `json:"reference,omitempty"`
	IBANLast4 string    `json:"iban_last4"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
}

// loadDemoFlows loads the example programs, registers the payment tools
// that the expense program's tool.call transitions name, and starts one
// expense, over the limit and submitted, owned by the workspace's first
// agent: its next step waits for a person's approval.
func (s *Part) loadDemoFlows(ctx context.Context) error {
	programs := examples.Programs()
	var expense *flow.Program
	for _, n := range slices.Sorted(maps.Keys(programs)) {
		p, err := s.flows.AddProgram(ctx, programs[n])
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if p.ID() == "expense-approval" {
			expense = p
		}
	}
	s.RegisterApprovalSummary("expense-approval", s.expenseSummary)
	s.RegisterStartCheck("expense-approval", checkExpenseStart)
	tools := s.demoPaymentTools()
	for i, t := range tools {
		callers := []EffectCaller{{Program: "expense-approval", Transition: "pay"}}
		if i == 1 {
			callers = []EffectCaller{{Program: "expense-approval", Transition: "reconcile-payment"}}
		}
		if err := s.RegisterEffectOnlyTool(t, callers...); err != nil {
			return err
		}
	}
	if err := writeDemoDeployRecipes(s.Config.DataDir); err != nil {
		s.Log.Warn("demo deployment recipes not written", "err", err)
	}
	if expense == nil {
		return nil
	}
	owner, err := s.Store.Setting(ctx, auth.SettingAgent)
	if errors.Is(err, store.ErrNotFound) {
		return nil // no workspace yet: nobody to own the demo expense
	}
	if err != nil {
		return err
	}
	if _, err := s.flows.Instance(ctx, DemoExpenseID); err == nil {
		return nil
	}
	_, err = s.flows.Start(ctx, flow.Instance{
		ID: DemoExpenseID, Program: expense.Fingerprint(), Owner: owner, Phase: "submitted",
		Objective: "expense-paid",
		Facts: map[string]flow.Fact{
			"expense.amount_band": {Status: flow.StatusKnown, Value: "over_limit"},
			"expense.amount":      {Status: flow.StatusKnown, Value: "1250.00 EUR"},
			"expense.description": {Status: flow.StatusKnown, Value: "Conference travel, Lisbon"},
			"expense.payee_iban":  {Status: flow.StatusKnown, Value: DemoPayeeIBAN},
			"expense.status":      {Status: flow.StatusKnown, Value: "submitted"},
		},
	})
	return err
}

// demoPaymentTools are the tools the demo expense program pays through:
// payments_send and payments_status, in that order. They are registered
// effect-only: payments_send runs only as the effect of the pay
// transition of the active expense-approval program, payments_status only
// as that of reconcile-payment; an agent calling them directly, or a
// program an agent loaded, is refused, so a payment always passes the
// program's law and, above the limit, a person's approval.
func (s *Part) demoPaymentTools() []tool.Tool {
	return []tool.Tool{
		tool.New(tool.Spec[paymentArgs]{
			Name:        "payments_send",
			Title:       "Send a payment (demo)",
			Description: "Demo payment rail for the expense-approval Flow: records a payment. It runs only as the effect of the Flow's pay transition.",
			Annotations: tool.Annotations{ReadOnly: false, Destructive: true, Idempotent: false, OpenWorld: true},
			Example:     paymentArgs{IBAN: "DE89370400440532013000", Reference: "EXP-7"},
		}, func(ctx context.Context, c tool.Call, a paymentArgs) (*tool.Reply[paymentSent], error) {
			fc, _ := flowCallFrom(ctx)
			if err := s.checkApprovedPayee(ctx, fc.Instance, a.IBAN); err != nil {
				return nil, err
			}
			s.paymentsMu.Lock()
			s.payments = append(s.payments, demoPayment{Instance: fc.Instance, Reference: a.Reference, IBANLast4: a.IBAN[len(a.IBAN)-4:], By: c.Principal.ID, At: s.Now().UTC()})
			n := len(s.payments)
			s.paymentsMu.Unlock()
			id := fmt.Sprintf("pay-%d", n)
			return tool.Answer(paymentSent{Payment: id, Facts: map[string]string{"payment.status": "sent", "payment.id": id}}), nil
		}),
		tool.New(tool.Spec[struct{}]{
			Name:        "payments_status",
			Title:       "Look up a payment (demo)",
			Description: "Demo payment rail for the expense-approval Flow: reports whether the instance's payment was sent. It runs only as the effect of the Flow's reconcile-payment transition.",
			Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: true},
		}, func(ctx context.Context, c tool.Call, _ struct{}) (*tool.Reply[paymentState], error) {
			fc, _ := flowCallFrom(ctx)
			s.paymentsMu.Lock()
			defer s.paymentsMu.Unlock()
			for _, p := range s.payments {
				if p.Instance == fc.Instance {
					return tool.Answer(paymentState{Phase: "paid", Facts: map[string]string{"payment.status": "sent"}}), nil
				}
			}
			return tool.Answer(paymentState{Phase: "approved", Facts: map[string]string{"payment.status": "not_sent"}}), nil
		}),
	}
}

// paymentArgs are payments_send's arguments.
type paymentArgs struct {
	IBAN      string `json:"iban" minLength:"5" maxLength:"34"`
	Reference string `json:"reference,omitempty" maxLength:"140"`
}

// paymentSent is payments_send's answer: the payment and the facts it
// establishes.
type paymentSent struct {
	Payment string            `json:"payment"`
	Facts   map[string]string `json:"facts"`
}

// paymentState is payments_status's answer: the phase the instance is in
// and the facts the lookup establishes.
type paymentState struct {
	Phase string            `json:"phase"`
	Facts map[string]string `json:"facts"`
}

// checkApprovedPayee refuses a payment to an IBAN other than the
// instance's expense.payee_iban fact, when it has one: that fact is the
// payee the approval card showed the person, so the agent applying pay
// cannot send the approved amount elsewhere.
func (s *Part) checkApprovedPayee(ctx context.Context, instance, iban string) error {
	inst, err := s.flows.Instance(ctx, instance)
	if err != nil {
		return nil
	}
	f := inst.Fact(expensePayeeFacet)
	if f.Status != flow.StatusKnown || f.Value == "" {
		return nil
	}
	if normalizeIBAN(iban) != normalizeIBAN(f.Value) {
		return tool.Errorf("forbidden", "the IBAN is not the payee a person approved for %s (%s); pay to that payee, or submit a new expense for a person to approve", instance, showIBAN(f.Value))
	}
	return nil
}

// The demo expense program wants a person's approval above
// demoExpenseLimit of demoExpenseCurrency. The limit is in one currency
// only: an amount in any other currency always wants a person, since no
// rate is applied and a limit in one currency never admits another.
var demoExpenseLimit = big.NewRat(500, 1)

const demoExpenseCurrency = "EUR"

// Facts of an expense whose band the amount decides.
const (
	expenseBandFacet = "expense.amount_band"
	bandWithinLimit  = "within_limit"
	bandOverLimit    = "over_limit"
)

// checkExpenseStart is the demo expense program's start check: the band
// that decides whether a person approves (expense.amount_band) follows
// from the amount, so nobody starting an expense can call a large amount
// within the limit. A band given without an amount, or one the amount
// contradicts, is refused; a missing band is set from the amount.
func checkExpenseStart(_ context.Context, _ store.Principal, _ string, facts map[string]flow.Fact) error {
	amount, hasAmount := facts[expenseAmountFacet]
	band, hasBand := facts[expenseBandFacet]
	if !hasAmount || amount.Status != flow.StatusKnown {
		if hasBand {
			return tool.Errorf("invalid_request", "%s follows from %s; give the amount (for example \"860.00 EUR\") and leave the band out", expenseBandFacet, expenseAmountFacet)
		}
		return nil
	}
	n, cur, ok := parseAmount(amount.Value)
	if !ok {
		return tool.Errorf("invalid_request", "%s %q must be a non-negative number and a three-letter currency code, for example \"860.00 EUR\"", expenseAmountFacet, amount.Value)
	}
	want := bandWithinLimit
	if cur != demoExpenseCurrency || n.Cmp(demoExpenseLimit) > 0 {
		want = bandOverLimit
	}
	if hasBand && (band.Status != flow.StatusKnown || band.Value != want) {
		return tool.Errorf("invalid_request", "%s is %s for %s (the limit is %s %s; an amount in another currency always needs a person); leave the band out and it is set from the amount",
			expenseBandFacet, want, formatAmount(amount.Value), demoExpenseLimit.FloatString(2), demoExpenseCurrency)
	}
	facts[expenseBandFacet] = flow.Fact{Status: flow.StatusKnown, Value: want}
	return nil
}

// parseAmount reads "1250.00 EUR": a non-negative decimal number, one
// space and a three-letter currency code, which it returns with the
// number.
func parseAmount(s string) (*big.Rat, string, bool) {
	num, cur, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok || len(cur) != 3 || strings.IndexFunc(cur, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return nil, "", false
	}
	whole, frac, _ := strings.Cut(num, ".")
	digits := func(d string) bool { return strings.IndexFunc(d, func(r rune) bool { return r < '0' || r > '9' }) < 0 }
	if whole == "" || len(num) > 40 || !digits(whole) || !digits(frac) {
		return nil, "", false
	}
	n, ok := new(big.Rat).SetString(num)
	return n, cur, ok
}

// The facts of an expense instance that its approval card reads.
const (
	expenseAmountFacet      = "expense.amount"
	expenseDescriptionFacet = "expense.description"
	expensePayeeFacet       = "expense.payee_iban"
)

// expenseSummary writes the approval card of the expense-approval program:
// the amount, what it is for and the payee (the whole IBAN, in groups of
// four), and, for the approve transition, what the pay step will send and,
// when no person approved an expense paid to that IBAN before, a warning
// that this is the first payment to it. It leaves transitions it does not
// know, and expenses without an amount, to the effect's summary.
func (s *Part) expenseSummary(ctx context.Context, req *flow.SummaryRequest) (flow.Summary, bool) {
	fact := func(facet string) string {
		if f := req.Instance.Fact(facet); f.Status == flow.StatusKnown {
			return f.Value
		}
		return ""
	}
	raw := fact(expenseAmountFacet)
	if raw == "" {
		return flow.Summary{}, false
	}
	amount := formatAmount(raw)
	what := amount
	if d := fact(expenseDescriptionFacet); d != "" {
		what += " for " + d
	}
	payee := ""
	iban := fact(expensePayeeFacet)
	if iban != "" {
		payee = showIBAN(iban)
	}
	var sum flow.Summary
	switch flow.LocalID(req.Transition.ID) {
	case "approve", "approve-within-limit":
		sum.Text = "Approve " + what
		if payee != "" {
			if !s.payeeApprovedBefore(ctx, req.Program.ID(), req.Instance.ID, iban) {
				sum.Lines = append(sum.Lines, firstPayeeWarning+": no expense paid to "+payee+" was approved before. Check the IBAN against the invoice before you approve.")
			}
			sum.Text += ", paid to " + payee
			sum.Lines = append(sum.Lines, "Approving lets the next step, pay, send "+amount+" to "+payee+" through payments_send; it refuses any other IBAN.")
		} else {
			sum.Lines = append(sum.Lines, "Approving lets the next step, pay, send "+amount+" through payments_send to the IBAN the agent gives then; no payee is recorded on this expense.")
		}
	case "reject":
		sum.Text = "Reject " + what
		for _, p := range req.Parameters {
			if p.Name == "reason" && !p.Secret {
				sum.Lines = append(sum.Lines, "Reason: "+p.Value)
			}
		}
	case "pay":
		sum.Text = "Pay " + what
		if payee != "" {
			sum.Text += " to " + payee
		}
	default:
		return flow.Summary{}, false
	}
	for _, a := range req.Transition.Assignments {
		sum.Lines = append(sum.Lines, fmt.Sprintf("Sets %s to %s", a.Facet, a.Value))
	}
	return sum, true
}

// formatAmount writes an amount such as "1250.00 EUR" with thousands
// separators: "1,250.00 EUR". Anything it does not read as a decimal
// number followed by a three-letter currency code is returned unchanged.
func formatAmount(s string) string {
	s = strings.TrimSpace(s)
	num, cur, ok := strings.Cut(s, " ")
	if !ok || len(cur) != 3 || strings.IndexFunc(cur, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return s
	}
	sign := ""
	if rest, ok := strings.CutPrefix(num, "-"); ok {
		sign, num = "-", rest
	}
	whole, frac, hasFrac := strings.Cut(num, ".")
	digits := func(d string) bool {
		return d != "" && strings.IndexFunc(d, func(r rune) bool { return r < '0' || r > '9' }) < 0
	}
	if !digits(whole) || hasFrac && !digits(frac) || len(whole) > 30 {
		return s
	}
	var b strings.Builder
	b.WriteString(sign)
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if hasFrac {
		b.WriteString("." + frac)
	}
	b.WriteString(" " + cur)
	return b.String()
}

// normalizeIBAN removes spaces and upper-cases an IBAN.
func normalizeIBAN(s string) string {
	return strings.ToUpper(strings.Join(strings.Fields(s), ""))
}

// showIBAN shows an IBAN in full, in groups of four characters
// ("PT50 0002 0123 1234 5678 9123 4"), so a person can compare it with the
// invoice group by group. A value that is not shaped like an IBAN is shown
// quoted, with any invisible or control character escaped, and says so.
func showIBAN(s string) string {
	n := normalizeIBAN(s)
	if len(n) < 15 || len(n) > 34 || !isUpperLetters(n[:2]) || !isDigits(n[2:4]) ||
		strings.IndexFunc(n, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }) >= 0 {
		return strconv.QuoteToASCII(s) + " (not shaped like an IBAN)"
	}
	var b strings.Builder
	for i := 0; i < len(n); i += 4 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(n[i:min(i+4, len(n))])
	}
	return b.String()
}

// firstPayeeWarning begins the summary line that warns a person that no
// expense paid to the payee was approved before; the card shows that line
// as a warning.
const firstPayeeWarning = "First payment to this account"

// payeeApprovedBefore reports whether a person approved an expense of the
// program programID, other than instance, that pays iban. When the store
// cannot tell, it reports false, so the card warns.
func (s *Part) payeeApprovedBefore(ctx context.Context, programID, instance, iban string) bool {
	want := normalizeIBAN(iban)
	insts, err := s.flows.Instances(ctx)
	if err != nil {
		return false
	}
	for _, in := range insts {
		if in.ID == instance {
			continue
		}
		if f := in.Fact(expensePayeeFacet); f.Status != flow.StatusKnown || normalizeIBAN(f.Value) != want {
			continue
		}
		if p, err := s.flows.Program(ctx, in.Program); err != nil || p.ID() != programID {
			continue
		}
		apps, err := s.flows.InstanceApprovals(ctx, in.ID)
		if err != nil {
			continue
		}
		for _, a := range apps {
			if a.Status == flow.ApprovalApproved {
				return true
			}
		}
	}
	return false
}

func isUpperLetters(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 'A' || r > 'Z' }) < 0
}

func isDigits(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// writeDemoDeployRecipes installs the Recipes the deployment program's
// run.spawn transitions name ("deploy" and "rollback"): short scripts that
// only print what a real deployment would do. Existing files are kept.
func writeDemoDeployRecipes(dataDir string) error {
	recipes := map[string]map[string]any{
		"deploy": {
			"description": "Demo deployment for the deployment Flow: prints what it would deploy, then succeeds.",
			"args":        []string{"environment", "version"},
			"template":    "echo deploying {version} to {environment}; sleep 2; echo deployed",
		},
		"rollback": {
			"description": "Demo rollback for the deployment Flow: prints what it would restore, then succeeds.",
			"args":        []string{"environment"},
			"template":    "echo restoring the previous release on {environment}; sleep 1; echo restored",
		},
	}
	dir := filepath.Join(dataDir, "recipes")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, r := range recipes {
		p := filepath.Join(dir, name+".json")
		if _, err := os.Stat(p); err == nil {
			continue
		}
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(p, append(b, '\n'), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// DemoSeedExpenseID is the expense instance the demo workspace's agent
// starts so that the person's first visit finds an approval waiting. The
// instance DemoExpenseID stays free for an agent to ask about.
const DemoSeedExpenseID = "expense-1000"

// SeedDemoApproval starts the seeded expense as agent when it does not
// exist, and while it is still submitted asks for its next step, which
// files (or finds) the request for a person's approval.
func (s *Part) SeedDemoApproval(ctx context.Context, agent store.Principal) (flow.Approval, error) {
	inst, err := s.flows.Instance(ctx, DemoSeedExpenseID)
	if flow.ErrorCode(err) == flow.CodeNotFound {
		// The agent drafts the expense and submits it through the
		// program, as any agent would; the amount sets the band.
		inst, err = s.flowStart(ctx, agent, startRequest{
			Program: "expense-approval", ID: DemoSeedExpenseID, Phase: "draft", Objective: "expense-paid",
			Facts: map[string]flow.Fact{
				"expense.amount":      {Status: flow.StatusKnown, Value: "860.00 EUR"},
				"expense.description": {Status: flow.StatusKnown, Value: "Team dinner after the launch"},
				"expense.payee_iban":  {Status: flow.StatusKnown, Value: DemoPayeeIBAN},
			},
		})
	}
	if err != nil {
		return flow.Approval{}, fmt.Errorf("flows: seeding the demo expense: %w", err)
	}
	if inst.Owner == agent.ID && inst.Phase == "draft" {
		res, err := s.flowPrescribe(ctx, agent, inst.ID, flow.Request{})
		if err != nil {
			return flow.Approval{}, fmt.Errorf("flows: submitting the demo expense: %w", err)
		}
		if res.Decision.Prescription == nil {
			return flow.Approval{}, fmt.Errorf("flows: submitting the demo expense: the program did not prescribe a step (%s): %s", res.Decision.Kind, res.Next)
		}
		if _, err := s.flowApply(ctx, agent, res.Decision.Prescription.ID, nil); err != nil {
			return flow.Approval{}, fmt.Errorf("flows: submitting the demo expense: %w", err)
		}
		if inst, err = s.flows.Instance(ctx, inst.ID); err != nil {
			return flow.Approval{}, fmt.Errorf("flows: submitting the demo expense: %w", err)
		}
	}
	if inst.Owner != agent.ID || inst.Phase != "submitted" {
		// Someone moved it on (a person approved it): nothing to re-file.
		return flow.Approval{}, nil
	}
	res, err := s.flowPrescribe(ctx, agent, inst.ID, flow.Request{})
	if err != nil {
		return flow.Approval{}, fmt.Errorf("flows: seeding the demo approval: %w", err)
	}
	if res.Approval == nil {
		return flow.Approval{}, fmt.Errorf("flows: seeding the demo approval: the expense did not wait for a person (%s): %s", res.Decision.Kind, res.Next)
	}
	return *res.Approval, nil
}
