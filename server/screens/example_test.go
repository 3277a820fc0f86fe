package screens_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/server/screens"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

// An application registers the tool a screen's Pay button calls, with the
// sentence the person confirms, then shows the screen. People see it under
// Screens in the web UI; the tool runs only after they confirm.
func ExamplePart_RegisterTool() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "assent-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	srv, err := server.New(ctx, server.Config{DataDir: dir, Store: db})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	err = srv.Screens().RegisterTool(screens.Tool{Tool: confirm.Tool{
		Name:    "payments.confirm",
		Params:  json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0}},"required":["amount"],"additionalProperties":false}`),
		Confirm: confirm.Template("Pay {amount}?"),
		Handler: func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
			return confirm.Result{Value: map[string]any{"receipt": "r-1"}}, nil
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	app := store.Principal{ID: "shop", Kind: store.KindService, Name: "shop"}
	id, err := srv.Screens().Show(ctx, app, `root = Card([amount, pay])
$amount = 42.5
amount = Text($amount, format="currency", currency="USD")
pay = Button("Pay", action="pay")
payIt = McpMutation(pay, tool="payments.confirm", params={amount: $amount})
`, screens.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(id) > 0, srv.Screens().ToolNames())
	// Output: true [payments.confirm]
}
