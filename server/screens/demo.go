package screens

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/store"
)

// builtinScreens are the canned screens of the mock generator and the demo
// (the same text as examples/screens/*.omni).
func builtinScreens() map[string]string {
	return map[string]string{
		"payment": `root = Card([title, merchant, amount, date, note, sep, actions])
title = Heading("Confirm payment")
merchant = Text("Blue Bottle Café, Oakland (CA)", tone="muted")
$amount = 42.50
amount = Text($amount, format="currency", currency="USD", tone="strong")
date = Text("2026-09-30", format="date")
$note = ""
note = Input($note, label="Note for merchant (optional)", placeholder="e.g. table 4, no rush", maxLength=200)
sep = Divider()
actions = Stack([pay, cancel], direction="row", gap="sm")
pay = Button("Pay", action="pay", variant="primary")
payIt = McpMutation(pay, tool="payments.confirm", params={amount: $amount, note: $note})
cancel = Button("Cancel", variant="secondary")
`,
		"signup": `root = Card([title, intro, form, actions], title="Create your account")
title = Heading("Sign up", level=1)
intro = Text("It takes a minute. We never share your address.", tone="muted")
form = Stack([name, email, plan, birthday, terms], gap="md")
$name = ""
name = Input($name, label="Full name", required=true, minLength=2, maxLength=80)
$email = ""
email = Input($email, label="Email address", placeholder="you@example.com", required=true, format="email")
$plan = ""
plan = Select($plan, label="Plan", options=["Free", "Pro", "Team"], placeholder="Choose a plan", required=true)
$birthday = ""
birthday = DateInput($birthday, label="Date of birth", max="2010-12-31")
$terms = false
terms = Switch($terms, label="I accept the terms of service", required=true)
actions = Stack([submit], direction="row")
submit = Button("Create account", action="signUp", variant="primary")
signUpIt = McpMutation(submit, tool="accounts.signUp", params={name: $name, email: $email, plan: $plan, terms: $terms})
`,
		"sales": `root = Stack([title, tabs], gap="lg")
title = Heading("Sales this quarter")
tabs = Tabs([overviewTab, regionsTab, ordersTab])
overviewTab = Tab("Overview", [summary, bars])
summary = Notice("Revenue is up 12% on last quarter.", tone="success", title="On track")
bars = BarChart("Revenue by month", ["Jul", "Aug", "Sep"], [web, shop], format="currency", currency="USD")
web = Series("Web", [12000, 15500, 17250])
shop = Series("Shop", [8000, 7600, 9100])
regionsTab = Tab("Regions", [pie, trend])
pie = PieChart("Share by region", [north, south, west], format="percent")
north = Slice("North", 45)
south = Slice("South", 30)
west = Slice("West", 25)
trend = LineChart("Orders per week", ["W1", "W2", "W3", "W4"], [orders])
orders = Series("Orders", [120, 135, 128, 160])
ordersTab = Tab("Orders", [table, list])
table = Table(["Order", "Customer", "Total"], [r1, r2])
r1 = TableRow(["#1042", "Ada Lovelace", 120.5])
r2 = TableRow(["#1043", "Alan Turing", 89])
list = List([i1, i2])
i1 = ListItem("Blue Bottle Café", detail="Oakland", trailing="$42.50")
i2 = ListItem("Ritual Coffee", detail="San Francisco", trailing="$18.00")
`,
		"gallery": `root = Card([title, badges, rating, msgs, img, skel, notice, missingRef], title="Every component")
title = Heading("Component gallery", level=2)
badges = Stack([b1, b2, b3, b4], direction="row", gap="sm", align="center")
b1 = Badge("Neutral")
b2 = Badge("Shipped", tone="success")
b3 = Badge("Late", tone="warning")
b4 = Badge("Refunded", tone="danger")
rating = Rating(4.5, max=5)
msgs = Stack([m1, m2])
m1 = Message("Can I change my delivery date?", from="user")
m2 = Message("Yes: pick a new date below.", from="assistant")
img = Image("cabin-pines", alt="A cabin among pines", ratio="16:9")
skel = Skeleton(lines=3)
notice = Notice("Stream text is always shown as text: <b>not bold</b>.", tone="info", title="Note")
`,
	}
}

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
	}}
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
	screens := builtinScreens()
	for _, name := range []string{"gallery", "sales", "signup", "payment"} {
		if _, err := s.Show(ctx, owner, screens[name], Options{}); err != nil {
			return err
		}
	}
	return nil
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
