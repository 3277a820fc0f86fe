package screens

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/assent-run/assent/examples"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/store"
)

// builtinScreens are the canned screens of the mock generator and the demo:
// examples/screens/*.omni.
func builtinScreens() map[string]string { return examples.Screens() }

// cabinPines is the demo's one registered picture.
const cabinPines = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 320 180"><rect width="320" height="180" fill="#cfe3f5"/><rect y="130" width="320" height="50" fill="#6b8f4e"/><polygon points="40,140 70,60 100,140" fill="#2f5d34"/><polygon points="230,140 265,50 300,140" fill="#2f5d34"/><polygon points="200,140 220,90 240,140" fill="#3c6e40"/><rect x="120" y="95" width="80" height="50" fill="#8a5a35"/><polygon points="112,98 160,62 208,98" fill="#5b3a22"/><rect x="150" y="115" width="20" height="30" fill="#3b2616"/><rect x="128" y="105" width="16" height="14" fill="#f6e7a6"/></svg>`

// Demo tool params schemas.
const (
	payParams    = `{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0,"maximum":10000},"note":{"type":"string","maxLength":200}},"required":["amount"],"additionalProperties":false}`
	signUpParams = `{"type":"object","properties":{"name":{"type":"string","minLength":2,"maxLength":80},"email":{"type":"string","format":"email"},"plan":{"enum":["Free","Pro","Team"]},"terms":{"const":true}},"required":["name","email","plan","terms"],"additionalProperties":false}`
)

// demoLedger records the demo's payments and sign-ups in memory.
type demoLedger struct {
	mu       sync.Mutex
	payments int
	signups  int
}

// loadDemoScreens registers the demo's tools (a payment with the
// confirmation "Pay {amount}?" and a sign-up) and shows its screens.
func (s *Part) loadDemoScreens(ctx context.Context) error {
	if err := s.RegisterPicture("cabin-pines", []byte(cabinPines), "image/svg+xml"); err != nil {
		return err
	}
	var ledger demoLedger
	pay := Tool{Tool: confirm.Tool{
		Name:        "payments.confirm",
		Description: "Pay a merchant the amount shown.",
		Params:      json.RawMessage(payParams),
		Confirm:     confirm.Template("Pay {amount}?"),
		Handler: func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
			ledger.mu.Lock()
			ledger.payments++
			n := ledger.payments
			ledger.mu.Unlock()
			receipt := fmt.Sprintf("rcpt-%04d", n)
			return confirm.Result{
				Value:  map[string]any{"receipt": receipt},
				Update: "actions = Stack([paid], direction=\"row\")\npaid = Notice(\"Payment sent. Receipt " + receipt + ".\", tone=\"success\", title=\"Paid\")\n",
			}, nil
		},
	}, Currency: map[string]string{"amount": "USD"}}
	signUp := Tool{Access: AccessPeople, Tool: confirm.Tool{
		Name:        "accounts.signUp",
		Description: "Create an account.",
		Params:      json.RawMessage(signUpParams),
		Handler: func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
			ledger.mu.Lock()
			ledger.signups++
			ledger.mu.Unlock()
			return confirm.Result{
				Value:  map[string]any{"created": true},
				Update: "actions = Stack([welcome], direction=\"row\")\nwelcome = Notice(\"Your account is ready.\", tone=\"success\", title=\"Welcome\")\n",
			}, nil
		},
	}}
	for _, t := range []Tool{pay, signUp} {
		if _, taken := s.screenTools.Lookup(t.Name); taken {
			continue
		}
		if err := s.RegisterTool(t); err != nil {
			return err
		}
	}
	owner := store.Principal{ID: "demo", Kind: store.KindService, Name: "demo"}
	shown := s.demoStreams(owner.ID)
	screens := builtinScreens()
	for _, name := range []string{"gallery", "sales", "signup", "payment"} {
		if shown[screens[name]] {
			continue // kept by the store from an earlier start
		}
		if _, err := s.Show(ctx, owner, screens[name], Options{}); err != nil {
			return err
		}
	}
	return nil
}

// demoStreams returns the streams of the screens ownerID has open.
func (s *Part) demoStreams(ownerID string) map[string]bool {
	s.scrMu.Lock()
	open := make([]*liveScreen, 0, len(s.screens))
	for _, sc := range s.screens {
		if sc.owner.ID == ownerID {
			open = append(open, sc)
		}
	}
	s.scrMu.Unlock()
	out := map[string]bool{}
	for _, sc := range open {
		sc.mu.RLock()
		out[sc.stream.String()] = true
		sc.mu.RUnlock()
	}
	return out
}

// DemoScreen returns the text of a built-in demo screen ("payment",
// "signup", "sales" or "gallery"), for clients that show it themselves.
func DemoScreen(name string) (string, bool) {
	text, ok := builtinScreens()[name]
	return text, ok
}

// DemoPaymentTitle is the heading of the demo payment screen.
const DemoPaymentTitle = "Confirm payment"

// SeedDemoScreen makes sure a payment screen is open (the demo shows one
// at start), showing it as agent when none is.
func (s *Part) SeedDemoScreen(ctx context.Context, agent store.Principal) (string, error) {
	s.scrMu.Lock()
	open := make([]*liveScreen, 0, len(s.screens))
	for _, sc := range s.screens {
		open = append(open, sc)
	}
	s.scrMu.Unlock()
	for _, sc := range open {
		sc.mu.Lock()
		title := render.Title(sc.doc)
		sc.mu.Unlock()
		if title == DemoPaymentTitle {
			return sc.id, nil
		}
	}
	id, err := s.Show(ctx, agent, builtinScreens()["payment"], Options{})
	if err != nil {
		return "", fmt.Errorf("screens: seeding the demo screen: %w", err)
	}
	return id, nil
}
