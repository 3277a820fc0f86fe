package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/assent-run/assent/examples"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store"
)

// Screen returns the text of one of the demo's screens ("payment",
// "signup", "sales" or "gallery"), for clients that show it themselves.
func Screen(name string) (string, bool) {
	text, ok := examples.Screens()[name]
	return text, ok
}

// PaymentTitle is the heading of the payment screen.
const PaymentTitle = "Confirm payment"

// cabinPines is the demo's one registered picture.
const cabinPines = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 320 180"><rect width="320" height="180" fill="#cfe3f5"/><rect y="130" width="320" height="50" fill="#6b8f4e"/><polygon points="40,140 70,60 100,140" fill="#2f5d34"/><polygon points="230,140 265,50 300,140" fill="#2f5d34"/><polygon points="200,140 220,90 240,140" fill="#3c6e40"/><rect x="120" y="95" width="80" height="50" fill="#8a5a35"/><polygon points="112,98 160,62 208,98" fill="#5b3a22"/><rect x="150" y="115" width="20" height="30" fill="#3b2616"/><rect x="128" y="105" width="16" height="14" fill="#f6e7a6"/></svg>`

// The params schemas of the screens' tools.
const (
	payParams    = `{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0,"maximum":10000},"note":{"type":"string","maxLength":200}},"required":["amount"],"additionalProperties":false}`
	signUpParams = `{"type":"object","properties":{"name":{"type":"string","minLength":2,"maxLength":80},"email":{"type":"string","format":"email"},"plan":{"enum":["Free","Pro","Team"]},"terms":{"const":true}},"required":["name","email","plan","terms"],"additionalProperties":false}`
)

// screenOwner is the principal the demo shows its screens as.
var screenOwner = store.Principal{ID: "demo", Kind: store.KindService, Name: "demo"}

// loadScreens registers the picture and the screens' tools (a payment
// with the confirmation "Pay {amount}?" and a sign-up), answers
// /api/generate with canned screens, and shows the screens the store did
// not keep from an earlier start.
func (a *App) loadScreens(ctx context.Context, dataDir string) error {
	part := a.srv.Screens()
	if err := part.RegisterPicture("cabin-pines", []byte(cabinPines), "image/svg+xml"); err != nil {
		return err
	}
	pay := screens.Tool{Tool: confirm.Tool{
		Name:        "payments.confirm",
		Description: "Pay a merchant the amount shown.",
		Params:      json.RawMessage(payParams),
		Confirm:     confirm.Template("Pay {amount}?"),
		Handler: func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
			a.mu.Lock()
			a.receipts++
			n := a.receipts
			a.mu.Unlock()
			receipt := fmt.Sprintf("rcpt-%04d", n)
			return confirm.Result{
				Value:  map[string]any{"receipt": receipt},
				Update: "actions = Stack([paid], direction=\"row\")\npaid = Notice(\"Payment sent. Receipt " + receipt + ".\", tone=\"success\", title=\"Paid\")\n",
			}, nil
		},
	}, Currency: map[string]string{"amount": "USD"}}
	signUp := screens.Tool{Access: screens.AccessPeople, Tool: confirm.Tool{
		Name:        "accounts.signUp",
		Description: "Create an account.",
		Params:      json.RawMessage(signUpParams),
		Handler: func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
			a.mu.Lock()
			a.signups++
			a.mu.Unlock()
			return confirm.Result{
				Value:  map[string]any{"created": true},
				Update: "actions = Stack([welcome], direction=\"row\")\nwelcome = Notice(\"Your account is ready.\", tone=\"success\", title=\"Welcome\")\n",
			}, nil
		},
	}}
	for _, t := range []screens.Tool{pay, signUp} {
		if slices.Contains(part.ToolNames(), t.Name) {
			continue // the application registered its own
		}
		if err := part.RegisterTool(t); err != nil {
			return err
		}
	}
	part.SetGenerator(screens.MockGenerator{Screens: cannedScreens(dataDir), Delay: 40 * time.Millisecond})
	shown := map[string]bool{}
	for _, sc := range part.LiveScreens() {
		if sc.Owner == screenOwner.ID {
			shown[sc.Stream] = true
		}
	}
	all := examples.Screens()
	for _, name := range []string{"gallery", "sales", "signup", "payment"} {
		if shown[all[name]] {
			continue // kept by the store from an earlier start
		}
		if _, err := part.Show(ctx, screenOwner, all[name], screens.Options{}); err != nil {
			return err
		}
	}
	return nil
}

// cannedScreens returns the screens /api/generate answers with: the
// *.omni files of dataDir/screens when that folder has any, else the
// demo's own.
func cannedScreens(dataDir string) map[string]string {
	if dataDir != "" {
		dir := filepath.Join(dataDir, "screens")
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			if m, err := screens.LoadMockScreens(os.DirFS(dir)); err == nil && len(m) > 0 {
				return m
			}
		}
	}
	return examples.Screens()
}

// seedScreen makes sure a payment screen is open, showing it as agent
// when none is.
func (a *App) seedScreen(ctx context.Context, agent store.Principal) (string, error) {
	part := a.srv.Screens()
	for _, sc := range part.LiveScreens() {
		if sc.Title == PaymentTitle {
			return sc.ID, nil
		}
	}
	text, _ := Screen("payment")
	id, err := part.Show(ctx, agent, text, screens.Options{})
	if err != nil {
		return "", fmt.Errorf("demo: seeding the payment screen: %w", err)
	}
	return id, nil
}
