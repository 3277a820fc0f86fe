package confirm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/field"
)

func Example() {
	tools, err := confirm.NewRegistry(confirm.Tool{
		Name:    "payments.confirm",
		Params:  json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","minimum":0}},"required":["amount"]}`),
		Confirm: confirm.Template("Pay {amount}?"),
		Handler: func(ctx context.Context, req confirm.Request) (confirm.Result, error) {
			fmt.Println("paying", req.Params["amount"])
			return confirm.Result{Value: map[string]any{"status": "paid"}}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	// The person pressed Pay. The fields the params read were checked with
	// field.Check; the note field passes.
	fields := []confirm.FieldProblem{{FieldID: "note", Problem: field.Check("Input", map[string]any{"maxLength": 20.0}, "table 4")}}
	press, err := tools.Prepare(ctx, "payments.confirm", map[string]any{"amount": 42.5}, fields)
	if err != nil {
		panic(err)
	}
	fmt.Println(press.Sentence())

	// The person chose Confirm.
	res, err := press.Confirm(ctx)
	fmt.Println(res.Value["status"], err)
	// Output:
	// Pay 42.5?
	// paying 42.5
	// paid <nil>
}

func ExampleRegistry_Prepare_blocked() {
	tools, _ := confirm.NewRegistry(confirm.Tool{
		Name:    "auth.sendMagicLink",
		Handler: func(context.Context, confirm.Request) (confirm.Result, error) { return confirm.Result{}, nil },
	})
	email := field.Check("Input", map[string]any{"required": true, "format": "email"}, "ada@localhost")
	_, err := tools.Prepare(context.Background(), "auth.sendMagicLink",
		map[string]any{"email": "ada@localhost"},
		[]confirm.FieldProblem{{FieldID: "email", Problem: email}})

	var e *confirm.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Focus, e.Fields[0].Problem.Key)
		fmt.Println(field.Messages(nil).Text(e.Fields[0].Problem))
	}
	// Output:
	// mutation_blocked email invalidEmail
	// Type an email address, such as name@example.com.
}

func ExampleRegistry_Prepare_unknownTool() {
	tools, _ := confirm.NewRegistry(confirm.Tool{
		Name:    "payments.confirm",
		Handler: func(context.Context, confirm.Request) (confirm.Result, error) { return confirm.Result{}, nil },
	})
	// A look-alike name (Cyrillic "о") is not the registered tool.
	_, err := tools.Prepare(context.Background(), "payments.c\u043enfirm", nil, nil)
	var e *confirm.Error
	errors.As(err, &e)
	fmt.Println(e.Code, e.Issue())
	// Output:
	// unknown_tool mutation_blocked
}

func ExampleTemplate() {
	c := confirm.Template("Send {amount} to {payee}?")
	// Each placeholder is filled once: a value that looks like a placeholder
	// stays as written.
	s, _ := c.Sentence(context.Background(), map[string]any{"amount": 10.0, "payee": "{amount}"})
	fmt.Println(s)
	// Output:
	// Send 10 to {amount}?
}

func ExampleFunc() {
	c := confirm.Func(func(_ context.Context, p map[string]any) (string, error) {
		amount, ok := p["amount"].(float64)
		if !ok {
			return "", errors.New("amount is not a number")
		}
		return fmt.Sprintf("Pay $%.2f?", amount), nil
	})
	s, _ := c.Sentence(context.Background(), map[string]any{"amount": 42.5})
	fmt.Println(s)
	// Output:
	// Pay $42.50?
}

func ExamplePending_Cancel() {
	tools, _ := confirm.NewRegistry(confirm.Tool{
		Name:    "orders.cancel",
		Confirm: confirm.Template("Cancel order {id}?"),
		Handler: func(context.Context, confirm.Request) (confirm.Result, error) {
			fmt.Println("this never runs")
			return confirm.Result{}, nil
		},
	})
	press, _ := tools.Prepare(context.Background(), "orders.cancel", map[string]any{"id": "A-17"}, nil)
	fmt.Println(press.Sentence())
	press.Cancel() // the person chose Cancel
	_, err := press.Confirm(context.Background())
	var e *confirm.Error
	errors.As(err, &e)
	fmt.Println(e.Code)
	// Output:
	// Cancel order A-17?
	// cancelled
}
