package server

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// demoFlowsFS holds copies of examples/flows (a test keeps them equal).
//
//go:embed demo/flows/*.json
var demoFlowsFS embed.FS

// demoExpenseID is the demo expense instance.
const demoExpenseID = "expense-1001"

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
func (s *Server) loadDemoFlows(ctx context.Context) error {
	names, err := fs.Glob(demoFlowsFS, "demo/flows/*.json")
	if err != nil {
		return err
	}
	var expense *flow.Program
	for _, n := range names {
		src, err := demoFlowsFS.ReadFile(n)
		if err != nil {
			return err
		}
		p, err := s.flows.AddProgram(ctx, src)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if p.ID() == "expense-approval" {
			expense = p
		}
	}
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
	if err := writeDemoDeployRecipes(s.cfg.DataDir); err != nil {
		s.log.Warn("demo deployment recipes not written", "err", err)
	}
	if expense == nil {
		return nil
	}
	owner, err := s.store.Setting(ctx, settingAgent)
	if errors.Is(err, store.ErrNotFound) {
		return nil // no workspace yet: nobody to own the demo expense
	}
	if err != nil {
		return err
	}
	if _, err := s.flows.Instance(ctx, demoExpenseID); err == nil {
		return nil
	}
	_, err = s.flows.Start(ctx, flow.Instance{
		ID: demoExpenseID, Program: expense.Fingerprint(), Owner: owner, Phase: "submitted",
		Objective: "expense-paid",
		Facts: map[string]flow.Fact{
			"expense.amount_band": {Status: flow.StatusKnown, Value: "over_limit"},
			"expense.amount":      {Status: flow.StatusKnown, Value: "1250.00 EUR"},
			"expense.description": {Status: flow.StatusKnown, Value: "Conference travel, Lisbon"},
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
func (s *Server) demoPaymentTools() []tool.Tool {
	return []tool.Tool{
		{
			Name:        "payments_send",
			Title:       "Send a payment (demo)",
			Description: "Demo payment rail for the expense-approval Flow: records a payment. It runs only as the effect of the Flow's pay transition.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"iban":{"type":"string","minLength":5,"maxLength":34},"reference":{"type":"string","maxLength":140}},"required":["iban"],"additionalProperties":false}`),
			Annotations: tool.Annotations{ReadOnly: false, Destructive: true, Idempotent: false, OpenWorld: true},
			Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
				var a struct {
					IBAN      string `json:"iban"`
					Reference string `json:"reference"`
				}
				if err := tool.DecodeArgs(c.Args, &a); err != nil {
					return nil, err
				}
				if len(a.IBAN) < 5 {
					return nil, tool.Errorf("invalid_request", "the IBAN is too short")
				}
				fc, _ := flowCallFrom(ctx)
				s.paymentsMu.Lock()
				s.payments = append(s.payments, demoPayment{Instance: fc.Instance, Reference: a.Reference, IBANLast4: a.IBAN[len(a.IBAN)-4:], By: c.Principal.ID, At: s.now().UTC()})
				n := len(s.payments)
				s.paymentsMu.Unlock()
				return &tool.Result{Structured: map[string]any{
					"payment": fmt.Sprintf("pay-%d", n),
					"facts":   map[string]string{"payment.status": "sent", "payment.id": fmt.Sprintf("pay-%d", n)},
				}}, nil
			},
		},
		{
			Name:        "payments_status",
			Title:       "Look up a payment (demo)",
			Description: "Demo payment rail for the expense-approval Flow: reports whether the instance's payment was sent. It runs only as the effect of the Flow's reconcile-payment transition.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
			Annotations: tool.Annotations{ReadOnly: true, Destructive: false, Idempotent: true, OpenWorld: true},
			Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
				fc, _ := flowCallFrom(ctx)
				s.paymentsMu.Lock()
				defer s.paymentsMu.Unlock()
				for _, p := range s.payments {
					if p.Instance == fc.Instance {
						return &tool.Result{Structured: map[string]any{"phase": "paid", "facts": map[string]string{"payment.status": "sent"}}}, nil
					}
				}
				return &tool.Result{Structured: map[string]any{"phase": "approved", "facts": map[string]string{"payment.status": "not_sent"}}}, nil
			},
		},
	}
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
