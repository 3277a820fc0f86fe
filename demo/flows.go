package demo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/examples"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// ExpenseID is the expense instance Install starts, over the limit and
// submitted, for an agent to ask about.
const ExpenseID = "expense-1001"

// LargeExpenseID is the expense instance Install starts above the
// two-person limit (5,000.00 EUR), submitted: its approval needs two
// different people.
const LargeExpenseID = "expense-1002"

// PayeeIBAN is the payee of the demo's expenses.
const PayeeIBAN = "PT50000201231234567891234"

// expenseProgram is the id of the expense-approval program.
const expenseProgram = "expense-approval"

// Payment is one payment the demo's payments_send tool recorded. The IBAN
// is kept only as its last four characters.
type Payment struct {
	Instance  string    `json:"instance_id"`
	Reference string    `json:"reference,omitempty"`
	IBANLast4 string    `json:"iban_last4"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
}

// Payments returns the payments payments_send recorded, oldest first.
func (a *App) Payments() []Payment {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.payments)
}

// loadFlows loads the example programs, registers the payment tools that
// the expense program's tool.call transitions name, places the Recipes
// the deployment program's run.spawn transitions name, and starts two
// expenses, submitted and owned by the workspace's agent: one over the
// limit, whose next step waits for a person's approval, and one over the
// two-person limit, whose next step waits for two different people's.
func (a *App) loadFlows(ctx context.Context) error {
	part := a.srv.Flows()
	programs := examples.Programs()
	var expense *flow.Program
	for _, n := range slices.Sorted(maps.Keys(programs)) {
		p, err := part.Kernel().AddProgram(ctx, programs[n])
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if p.ID() == expenseProgram {
			expense = p
		}
	}
	part.RegisterApprovalSummary(expenseProgram, a.expenseSummary)
	part.RegisterStartCheck(expenseProgram, checkExpenseStart)
	send, status := a.paymentTools()
	if err := part.RegisterEffectOnlyTool(send, flows.EffectCaller{Program: expenseProgram, Transition: "pay"}); err != nil {
		return err
	}
	if err := part.RegisterEffectOnlyTool(status, flows.EffectCaller{Program: expenseProgram, Transition: "reconcile-payment"}); err != nil {
		return err
	}
	if err := a.placeDeployRecipes(); err != nil {
		a.log.Warn("demo deployment Recipes not written", "err", err)
	}
	if expense == nil {
		return nil
	}
	owner, err := a.st.Settings().Setting(ctx, auth.SettingAgent)
	if errors.Is(err, store.ErrNotFound) {
		return nil // no workspace yet: nobody to own the expense
	}
	if err != nil {
		return err
	}
	for _, e := range []struct{ id, band, amount, what string }{
		{ExpenseID, bandOverLimit, "1250.00 EUR", "Conference travel, Lisbon"},
		{LargeExpenseID, bandTwoPeople, "7500.00 EUR", "Team offsite venue, Porto"},
	} {
		if _, err := part.Kernel().Instance(ctx, e.id); err == nil {
			continue
		}
		_, err = part.Kernel().Start(ctx, flow.Instance{
			ID: e.id, Program: expense.Fingerprint(), Owner: owner, Phase: "submitted",
			Objective: "expense-paid",
			Facts: map[string]flow.Fact{
				expenseBandFacet:        {Status: flow.StatusKnown, Value: e.band},
				expenseAmountFacet:      {Status: flow.StatusKnown, Value: e.amount},
				expenseDescriptionFacet: {Status: flow.StatusKnown, Value: e.what},
				expensePayeeFacet:       {Status: flow.StatusKnown, Value: PayeeIBAN},
				"expense.status":        {Status: flow.StatusKnown, Value: "submitted"},
			},
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// paymentTools are the tools the expense program pays through:
// payments_send and payments_status. They are registered effect-only:
// payments_send runs only as the effect of the pay transition of the
// active expense-approval program, payments_status only as that of
// reconcile-payment; an agent calling them directly, or a program an agent
// loaded, is refused, so a payment always passes the program's law and,
// above the limit, a person's approval.
func (a *App) paymentTools() (send, status tool.Tool) {
	send = tool.New(tool.Spec[paymentArgs]{
		Name:        "payments_send",
		Title:       "Send a payment (demo)",
		Description: "Demo payment rail for the expense-approval Flow: records a payment. It runs only as the effect of the Flow's pay transition.",
		Annotations: tool.Annotations{ReadOnly: false, Destructive: true, Idempotent: false, OpenWorld: true},
		Example:     paymentArgs{IBAN: "DE89370400440532013000", Reference: "EXP-7"},
	}, func(ctx context.Context, c tool.Call, args paymentArgs) (*tool.Reply[paymentSent], error) {
		fc, _ := flows.EffectCallFrom(ctx)
		if err := a.checkApprovedPayee(ctx, fc.Instance, args.IBAN); err != nil {
			return nil, err
		}
		a.mu.Lock()
		a.payments = append(a.payments, Payment{Instance: fc.Instance, Reference: args.Reference, IBANLast4: args.IBAN[len(args.IBAN)-4:], By: c.Principal.ID, At: a.now().UTC()})
		n := len(a.payments)
		a.mu.Unlock()
		id := fmt.Sprintf("pay-%d", n)
		return tool.Answer(paymentSent{Payment: id, Facts: map[string]string{"payment.status": "sent", "payment.id": id}}), nil
	})
	status = tool.New(tool.Spec[struct{}]{
		Name:        "payments_status",
		Title:       "Look up a payment (demo)",
		Description: "Demo payment rail for the expense-approval Flow: reports whether the instance's payment was sent. It runs only as the effect of the Flow's reconcile-payment transition.",
		Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: true},
	}, func(ctx context.Context, c tool.Call, _ struct{}) (*tool.Reply[paymentState], error) {
		fc, _ := flows.EffectCallFrom(ctx)
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, p := range a.payments {
			if p.Instance == fc.Instance {
				return tool.Answer(paymentState{Phase: "paid", Facts: map[string]string{"payment.status": "sent"}}), nil
			}
		}
		return tool.Answer(paymentState{Phase: "approved", Facts: map[string]string{"payment.status": "not_sent"}}), nil
	})
	return send, status
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
func (a *App) checkApprovedPayee(ctx context.Context, instance, iban string) error {
	inst, err := a.srv.Flows().Kernel().Instance(ctx, instance)
	if err != nil {
		return nil
	}
	f := inst.Fact(expensePayeeFacet)
	if f.Status != flow.StatusKnown || f.Value == "" {
		return nil
	}
	if flows.NormalizeIBAN(iban) != flows.NormalizeIBAN(f.Value) {
		return tool.Errorf("forbidden", "the IBAN is not the payee a person approved for %s (%s); pay to that payee, or submit a new expense for a person to approve", instance, flows.ShowIBAN(f.Value))
	}
	return nil
}

// The expense program wants a person's approval above expenseLimit of
// expenseCurrency, and two different people's above twoPersonLimit. The
// limits are in one currency only: an amount in any other currency always
// wants two people, since no rate is applied and a limit in one currency
// never admits another.
var (
	expenseLimit   = big.NewRat(500, 1)
	twoPersonLimit = big.NewRat(5000, 1)
)

const expenseCurrency = "EUR"

// The facts of an expense that its start check and approval card read.
const (
	expenseAmountFacet      = "expense.amount"
	expenseBandFacet        = "expense.amount_band"
	expenseDescriptionFacet = "expense.description"
	expensePayeeFacet       = "expense.payee_iban"
	bandWithinLimit         = "within_limit"
	bandOverLimit           = "over_limit"
	bandTwoPeople           = "over_two_person_limit"
)

// checkExpenseStart is the expense program's start check: the band that
// decides whether a person approves (expense.amount_band) follows from the
// amount, so nobody starting an expense can call a large amount within the
// limit. A band given without an amount, or one the amount contradicts, is
// refused; a missing band is set from the amount.
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
	want := expenseBand(n, cur)
	if hasBand && (band.Status != flow.StatusKnown || band.Value != want) {
		return tool.Errorf("invalid_request", "%s is %s for %s (above %s %s one person approves, above %s %s two different people; an amount in another currency always needs two people); leave the band out and it is set from the amount",
			expenseBandFacet, want, formatAmount(amount.Value), expenseLimit.FloatString(2), expenseCurrency, twoPersonLimit.FloatString(2), expenseCurrency)
	}
	facts[expenseBandFacet] = flow.Fact{Status: flow.StatusKnown, Value: want}
	return nil
}

// expenseBand is the band of amount n in currency cur: within the limit
// (the agent approves), over it (a person approves) or over the
// two-person limit (two different people approve).
func expenseBand(n *big.Rat, cur string) string {
	switch {
	case cur != expenseCurrency || n.Cmp(twoPersonLimit) > 0:
		return bandTwoPeople
	case n.Cmp(expenseLimit) > 0:
		return bandOverLimit
	}
	return bandWithinLimit
}

// parseAmount reads "1250.00 EUR": a non-negative decimal number, one
// space and a three-letter currency code, which it returns with the
// number.
func parseAmount(s string) (*big.Rat, string, bool) {
	num, cur, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok || !isCurrency(cur) {
		return nil, "", false
	}
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" || len(num) > 40 || !allDigits(whole) || !allDigits(frac) {
		return nil, "", false
	}
	n, ok := new(big.Rat).SetString(num)
	return n, cur, ok
}

// isCurrency reports whether s is shaped like an ISO 4217 code: three
// upper-case letters.
func isCurrency(s string) bool {
	return len(s) == 3 && strings.IndexFunc(s, func(r rune) bool { return r < 'A' || r > 'Z' }) < 0
}

// allDigits reports whether s holds only the digits 0 to 9 ("" does).
func allDigits(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// firstPayeeWarning begins the summary line that warns a person that no
// expense paid to the payee was approved before.
const firstPayeeWarning = flows.WarningPrefix + "First payment to this account"

// expenseSummary writes the approval card of the expense-approval program:
// the amount, what it is for and the payee (the whole IBAN, in groups of
// four), and, for the approve transition, what the pay step will send and,
// when no person approved an expense paid to that IBAN before, a warning
// that this is the first payment to it. It leaves transitions it does not
// know, and expenses without an amount, to the effect's summary.
func (a *App) expenseSummary(ctx context.Context, req *flow.SummaryRequest) (flow.Summary, bool) {
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
		payee = flows.ShowIBAN(iban)
	}
	var sum flow.Summary
	switch flow.LocalID(req.Transition.ID) {
	case "approve", "approve-within-limit", "approve-two-people":
		sum.Text = "Approve " + what
		if payee != "" {
			if !a.payeeApprovedBefore(ctx, req.Program.ID(), req.Instance.ID, iban) {
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
	for _, as := range req.Transition.Assignments {
		name := as.Facet[strings.LastIndexByte(as.Facet, '.')+1:]
		sum.Lines = append(sum.Lines, fmt.Sprintf("Records the %s as “%s”", strings.ReplaceAll(name, "_", " "), strings.ReplaceAll(as.Value, "_", " ")))
	}
	return sum, true
}

// formatAmount writes an amount such as "1250.00 EUR" with thousands
// separators: "1,250.00 EUR". Anything it does not read as a decimal
// number followed by a three-letter currency code is returned unchanged.
func formatAmount(s string) string {
	s = strings.TrimSpace(s)
	num, cur, ok := strings.Cut(s, " ")
	if !ok || !isCurrency(cur) {
		return s
	}
	sign := ""
	if rest, ok := strings.CutPrefix(num, "-"); ok {
		sign, num = "-", rest
	}
	whole, frac, hasFrac := strings.Cut(num, ".")
	if whole == "" || !allDigits(whole) || hasFrac && (frac == "" || !allDigits(frac)) || len(whole) > 30 {
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

// payeeApprovedBefore reports whether a person approved an expense of the
// program programID, other than instance, that pays iban. When the store
// cannot tell, it reports false, so the card warns.
func (a *App) payeeApprovedBefore(ctx context.Context, programID, instance, iban string) bool {
	k := a.srv.Flows().Kernel()
	want := flows.NormalizeIBAN(iban)
	insts, err := k.Instances(ctx)
	if err != nil {
		return false
	}
	for _, in := range insts {
		if in.ID == instance {
			continue
		}
		if f := in.Fact(expensePayeeFacet); f.Status != flow.StatusKnown || flows.NormalizeIBAN(f.Value) != want {
			continue
		}
		if p, err := k.Program(ctx, in.Program); err != nil || p.ID() != programID {
			continue
		}
		apps, err := k.InstanceApprovals(ctx, in.ID)
		if err != nil {
			continue
		}
		for _, ap := range apps {
			if ap.Status == flow.ApprovalApproved {
				return true
			}
		}
	}
	return false
}
