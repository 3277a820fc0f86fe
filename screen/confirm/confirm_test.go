package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/assent-run/assent/screen/field"
)

const paySchema = `{
	"type": "object",
	"properties": {
		"amount": {"type": "number", "minimum": 0},
		"note": {"type": "string", "maxLength": 20},
		"card": {"type": "string", "pattern": "^[0-9]{16}$"},
		"email": {"type": "string", "format": "email"}
	},
	"required": ["amount"],
	"additionalProperties": false
}`

// recorder is a handler that counts its calls and keeps the last params.
type recorder struct {
	calls  atomic.Int32
	mu     sync.Mutex
	params map[string]any
	err    error
}

func (r *recorder) handle(_ context.Context, req Request) (Result, error) {
	r.calls.Add(1)
	r.mu.Lock()
	r.params = req.Params
	r.mu.Unlock()
	if r.err != nil {
		return Result{}, r.err
	}
	return Result{Value: map[string]any{"paid": req.Params["amount"]}}, nil
}

func payTool(rec *recorder) Tool {
	return Tool{
		Name:    "payments.confirm",
		Params:  json.RawMessage(paySchema),
		Secret:  []string{"card"},
		Confirm: Template("Pay {amount}?"),
		Handler: rec.handle,
	}
}

func newRegistry(t *testing.T, tools ...Tool) *Registry {
	t.Helper()
	r, err := NewRegistry(tools...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// code returns the Code of err, or "" when err is not an *Error.
func code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestValidName(t *testing.T) {
	valid := []string{"payments.confirm", "a.b", "auth.sendMagicLink", "a_1.b_2.c3", "x." + strings.Repeat("y", MaxNameLength-2)}
	invalid := []string{
		"", "payments", "Payments.confirm", "payments.Confirm", "payments..confirm", ".a.b", "a.b.",
		"payments.c\u043enfirm", // Cyrillic o
		"payments.\u200bconfirm",
		"\uff50ayments.confirm", // full-width p
		"payments.confirm ", " payments.confirm", "payments .confirm", "payments.con-firm",
		"1a.b", "_a.b", "a._b", "a.b\n",
		"x." + strings.Repeat("y", MaxNameLength-1),
	}
	for _, n := range valid {
		if !ValidName(n) {
			t.Errorf("ValidName(%q) = false", n)
		}
	}
	for _, n := range invalid {
		if ValidName(n) {
			t.Errorf("ValidName(%q) = true", n)
		}
	}
}

func TestPrepareOrder(t *testing.T) {
	rec := &recorder{}
	r := newRegistry(t, payTool(rec))
	required := &field.Problem{Key: field.KeyRequired}
	ctx := context.Background()
	tests := []struct {
		name   string
		tool   string
		params map[string]any
		fields []FieldProblem
		code   string
	}{
		{"fields before an unknown tool", "nope.nope", nil, []FieldProblem{{"email", required}}, CodeMutationBlocked},
		{"fields before bad params", "payments.confirm", map[string]any{"amount": "x"}, []FieldProblem{{"email", required}}, CodeMutationBlocked},
		{"tool before params", "payments.confirmed", map[string]any{"amount": "x"}, nil, CodeUnknownTool},
		{"params before confirmation", "payments.confirm", map[string]any{"note": "x"}, nil, CodeInvalidParams},
		{"passing fields don't block", "payments.confirm", map[string]any{"amount": 1.0}, []FieldProblem{{"a", nil}, {"b", nil}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := r.Prepare(ctx, tt.tool, tt.params, tt.fields)
			if got := code(err); got != tt.code {
				t.Fatalf("Prepare code = %q (%v), want %q", got, err, tt.code)
			}
			if (p == nil) == (err == nil) {
				t.Fatalf("Prepare = %v, %v: want exactly one", p, err)
			}
		})
	}
	if n := rec.calls.Load(); n != 0 {
		t.Errorf("Prepare ran the handler %d times", n)
	}
}

func TestMutationBlocked(t *testing.T) {
	r := newRegistry(t, payTool(&recorder{}))
	fields := []FieldProblem{
		{"name", nil},
		{"email", &field.Problem{Key: field.KeyInvalidEmail}},
		{"terms", nil},
		{"note", &field.Problem{Key: field.KeyTooLong, Values: map[string]any{"max": 5.0}}},
	}
	_, err := r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": 1.0}, fields)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v", err)
	}
	if e.Code != CodeMutationBlocked || e.Issue() != "mutation_blocked" {
		t.Errorf("code %q issue %q", e.Code, e.Issue())
	}
	if e.Focus != "email" {
		t.Errorf("Focus = %q, want email", e.Focus)
	}
	if len(e.Fields) != 2 || e.Fields[0].FieldID != "email" || e.Fields[1].FieldID != "note" {
		t.Errorf("Fields = %+v", e.Fields)
	}
	if !strings.Contains(e.Error(), `"email" (invalidEmail)`) {
		t.Errorf("message %q should name the fields", e.Error())
	}
}

func TestUnknownTool(t *testing.T) {
	r := newRegistry(t, payTool(&recorder{}), Tool{Name: "payments.refund"})
	spoofs := []string{
		"payments.c\u043enfirm",     // Cyrillic small o
		"payments.\u200bconfirm",    // zero-width space
		"payments.confirm\u200b",    // trailing zero-width space
		"\uff50ayments.confirm",     // full-width p
		"payments.confirm ",         // trailing space
		"Payments.confirm",          // upper case
		"payments.confirm\x00",      // NUL
		"payments.co\u0301nfirm",    // combining accent
		"payment.confirm",           // misspelling
		"payments.refund",           // registered without a handler
		"payments.confirm.all",      // longer
		"PAYMENTS.CONFIRM",          // case
		"payments\u2024confirm",     // one dot leader
		"payments.confirm\u202e",    // direction override
		strings.Repeat("a.b", 1000), // long
	}
	for _, name := range spoofs {
		_, err := r.Prepare(context.Background(), name, map[string]any{"amount": 1.0}, nil)
		if code(err) != CodeUnknownTool {
			t.Errorf("Prepare(%q) = %v, want unknown_tool", name, err)
		}
		if err := r.Register(Tool{Name: name, Handler: (&recorder{}).handle}); name != "payment.confirm" && name != "payments.refund" && name != "payments.confirm.all" && code(err) != CodeInvalidTool {
			t.Errorf("Register(%q) = %v, want invalid_tool", name, err)
		}
	}
}

func TestInvalidParams(t *testing.T) {
	r := newRegistry(t, payTool(&recorder{}))
	tests := []struct {
		name   string
		params map[string]any
		paths  []string
	}{
		{"missing required", map[string]any{}, []string{""}},
		{"nil params", nil, []string{""}},
		{"wrong type", map[string]any{"amount": "42"}, []string{"amount"}},
		{"below minimum", map[string]any{"amount": -1.0}, []string{"amount"}},
		{"extra param", map[string]any{"amount": 1.0, "confirm": false}, []string{""}},
		{"two issues", map[string]any{"amount": -1.0, "note": strings.Repeat("x", 21)}, []string{"amount", "note"}},
		{"format asserted", map[string]any{"amount": 1.0, "email": "not an email"}, []string{"email"}},
		{"NaN", map[string]any{"amount": math.NaN()}, []string{"amount"}},
		{"not JSON", map[string]any{"amount": 1.0, "note": make(chan int)}, []string{"note"}},
		{"huge json.Number", map[string]any{"amount": json.Number("1e999")}, []string{"amount"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Prepare(context.Background(), "payments.confirm", tt.params, nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidParams {
				t.Fatalf("err = %v, want invalid_params", err)
			}
			if e.Issue() != "mutation_blocked" {
				t.Errorf("Issue() = %q", e.Issue())
			}
			var paths []string
			for _, is := range e.Issues {
				if is.Message == "" {
					t.Errorf("issue %+v has no message", is)
				}
				if len(paths) == 0 || paths[len(paths)-1] != is.Path {
					paths = append(paths, is.Path)
				}
			}
			if fmt.Sprint(paths) != fmt.Sprint(tt.paths) {
				t.Errorf("issue paths = %q, want %q (%+v)", paths, tt.paths, e.Issues)
			}
		})
	}
}

func TestInvalidParamsMessages(t *testing.T) {
	r := newRegistry(t, payTool(&recorder{}))
	_, err := r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": "lots"}, nil)
	var e *Error
	errors.As(err, &e)
	if len(e.Issues) != 1 || e.Issues[0].Path != "amount" || !strings.Contains(e.Issues[0].Message, "want number") || strings.HasPrefix(e.Issues[0].Message, "at ") {
		t.Errorf("issues = %+v", e.Issues)
	}
	if !strings.Contains(e.Error(), "amount: ") {
		t.Errorf("Error() = %q should list path: message", e.Error())
	}
}

func TestSecretParamsNeverShown(t *testing.T) {
	r := newRegistry(t, payTool(&recorder{}))
	const card = "4111x111111111119999"
	_, err := r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": 1.0, "card": card}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidParams {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(e.Error(), card) || strings.Contains(fmt.Sprint(e.Issues), card) {
		t.Errorf("secret value leaked: %v %+v", e, e.Issues)
	}
	if len(e.Issues) != 1 || e.Issues[0].Path != "card" || !strings.Contains(e.Issues[0].Message, `"pattern"`) {
		t.Errorf("issues = %+v", e.Issues)
	}
	_, err = r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": 1.0, "card": json.Number(card)}, nil)
	if code(err) != CodeInvalidParams || strings.Contains(err.Error(), card) {
		t.Errorf("a secret that isn't JSON leaked or passed: %v", err)
	}
	// A non-secret param's issue may repeat its value.
	_, err = r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": 1.0, "email": "ada"}, nil)
	if !strings.Contains(err.Error(), "ada") {
		t.Errorf("err = %v", err)
	}
}

func TestGoValuesAreConverted(t *testing.T) {
	rec := &recorder{}
	r := newRegistry(t, Tool{
		Name:    "orders.place",
		Params:  json.RawMessage(`{"type":"object","properties":{"qty":{"type":"integer"},"skus":{"type":"array","items":{"type":"string"}}}}`),
		Handler: rec.handle,
	})
	p, err := r.Prepare(context.Background(), "orders.place", map[string]any{"qty": 3, "skus": []string{"a", "b"}, "n": json.Number("2.5")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Confirm(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"qty": 3.0, "skus": []any{"a", "b"}, "n": 2.5}
	if fmt.Sprint(rec.params) != fmt.Sprint(want) {
		t.Errorf("handler params = %#v, want %#v", rec.params, want)
	}
}

func TestConfirmationSentence(t *testing.T) {
	tests := []struct {
		name     string
		confirm  Confirmation
		params   map[string]any
		sentence string
		code     string
	}{
		{"template", Template("Pay {amount}?"), map[string]any{"amount": 42.5}, "Pay 42.5?", ""},
		{"whole number", Template("Pay {amount}?"), map[string]any{"amount": 42.0}, "Pay 42?", ""},
		{"filled once", Template("Pay {amount}: {note}"), map[string]any{"amount": 1.0, "note": "{amount} {note}"}, "Pay 1: {amount} {note}", ""},
		{"null is empty", Template("Pay {amount} ({note})"), map[string]any{"amount": 1.0, "note": nil}, "Pay 1 ()", ""},
		{"bidi override is dropped and isolated", Template("Pay {note} {amount}?"), map[string]any{"amount": 1000.0, "note": "x\u202e"}, "Pay \u2068x\u2069 1000?", ""},
		{"early isolate end is dropped", Template("{note}!"), map[string]any{"amount": 1.0, "note": "a\u2069\u202eb"}, "\u2068ab\u2069!", ""},
		{"right-to-left text is isolated", Template("Pay {note} {amount}?"), map[string]any{"amount": 1000.0, "note": "\u05e9\u05dc\u05d5\u05dd"}, "Pay \u2068\u05e9\u05dc\u05d5\u05dd\u2069 1000?", ""},
		{"left-to-right text is untouched", Template("Pay {note}"), map[string]any{"amount": 1.0, "note": "caf\u00e9 \u4e2d\u6587"}, "Pay caf\u00e9 \u4e2d\u6587", ""},
		{"only controls is blank", Template("{note}"), map[string]any{"amount": 1.0, "note": "\u202e"}, "", CodeConfirmationFailed},
		{"markup is text", Template("Pay {note}"), map[string]any{"amount": 1.0, "note": "<b>x</b>"}, "Pay <b>x</b>", ""},
		{"same param twice", Template("{amount}/{amount}"), map[string]any{"amount": 2.0}, "2/2", ""},
		{"non-placeholders kept", Template("{ amount } {} {1x} {amount"), map[string]any{"amount": 2.0}, "{ amount } {} {1x} {amount", ""},
		{"underscore names", Template("Card ending {last_4}"), map[string]any{"amount": 2.0, "last_4": "1234"}, "Card ending 1234", ""},
		{"missing param", Template("Pay {amount} to {payee}?"), map[string]any{"amount": 1.0}, "", CodeConfirmationFailed},
		{"blank result", Template("{note}"), map[string]any{"amount": 1.0, "note": " \u00a0"}, "", CodeConfirmationFailed},
		{"none", Confirmation{}, map[string]any{"amount": 1.0}, "", ""},
		{"nil func is none", Func(nil), map[string]any{"amount": 1.0}, "", ""},
		{"func", Func(func(_ context.Context, p map[string]any) (string, error) {
			return fmt.Sprintf("Pay $%.2f?", p["amount"]), nil
		}), map[string]any{"amount": 42.5}, "Pay $42.50?", ""},
		{"func error", Func(func(context.Context, map[string]any) (string, error) {
			return "", errors.New("rates unavailable")
		}), map[string]any{"amount": 1.0}, "", CodeConfirmationFailed},
		{"func panic", Func(func(context.Context, map[string]any) (string, error) {
			panic("boom")
		}), map[string]any{"amount": 1.0}, "", CodeConfirmationFailed},
		{"func blank", Func(func(context.Context, map[string]any) (string, error) {
			return "\n", nil
		}), map[string]any{"amount": 1.0}, "", CodeConfirmationFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			tool := Tool{
				Name:    "payments.confirm",
				Params:  json.RawMessage(`{"type":"object","required":["amount"]}`),
				Confirm: tt.confirm,
				Handler: rec.handle,
			}
			r := newRegistry(t, tool)
			p, err := r.Prepare(context.Background(), tool.Name, tt.params, nil)
			if code(err) != tt.code {
				t.Fatalf("Prepare = %v, want code %q", err, tt.code)
			}
			if err != nil {
				var e *Error
				errors.As(err, &e)
				if e.Issue() != "handler_failed" || e.Err == nil {
					t.Errorf("Issue() = %q, Err = %v", e.Issue(), e.Err)
				}
				return
			}
			if p.Sentence() != tt.sentence || p.NeedsConfirmation() != (tt.sentence != "") {
				t.Errorf("Sentence() = %q, NeedsConfirmation() = %v; want %q", p.Sentence(), p.NeedsConfirmation(), tt.sentence)
			}
			if rec.calls.Load() != 0 {
				t.Error("the handler ran before Confirm")
			}
		})
	}
}

func TestConfirmationFuncGetsCheckedCopy(t *testing.T) {
	var seen any
	rec := &recorder{}
	tool := Tool{
		Name: "payments.confirm",
		Confirm: Func(func(_ context.Context, p map[string]any) (string, error) {
			seen = p["amount"]
			p["amount"] = 1e9 // a misbehaving function can't change what runs
			return "ok?", nil
		}),
		Params:  json.RawMessage(`{"type":"object"}`),
		Handler: rec.handle,
	}
	r := newRegistry(t, tool)
	p, err := r.Prepare(context.Background(), tool.Name, map[string]any{"amount": 5}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if seen != 5.0 {
		t.Errorf("function saw %#v, want the checked float64 5", seen)
	}
	if _, err := p.Confirm(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec.params["amount"] != 5.0 {
		t.Errorf("handler got %v, want 5", rec.params["amount"])
	}
}

func TestRegisterRefuses(t *testing.T) {
	h := (&recorder{}).handle
	tests := []struct {
		name string
		tool Tool
	}{
		{"bad name", Tool{Name: "pay", Handler: h}},
		{"schema not JSON", Tool{Name: "a.b", Params: json.RawMessage(`{`), Handler: h}},
		{"schema trailing data", Tool{Name: "a.b", Params: json.RawMessage(`{} {}`), Handler: h}},
		{"schema invalid", Tool{Name: "a.b", Params: json.RawMessage(`{"type": 5}`), Handler: h}},
		{"schema refers to a file", Tool{Name: "a.b", Params: json.RawMessage(`{"$ref": "file:///etc/passwd"}`), Handler: h}},
		{"schema refers to the network", Tool{Name: "a.b", Params: json.RawMessage(`{"$ref": "https://example.com/s.json"}`), Handler: h}},
		{"blank template", Tool{Name: "a.b", Confirm: Template(" \t"), Handler: h}},
		{"invisible template", Tool{Name: "a.b", Confirm: Template("\u200b\u2068\u2069"), Handler: h}},
		{"template shows a secret", Tool{Name: "a.b", Secret: []string{"pin"}, Confirm: Template("Use PIN {pin}?"), Handler: h}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Registry
			err := r.Register(tt.tool)
			if code(err) != CodeInvalidTool {
				t.Fatalf("Register = %v, want invalid_tool", err)
			}
			if len(r.Names()) != 0 {
				t.Errorf("a refused tool was registered")
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	var r Registry // the zero value is ready
	if _, ok := r.Lookup("a.b"); ok {
		t.Fatal("empty registry found a tool")
	}
	h := (&recorder{}).handle
	for _, n := range []string{"z.z", "a.b", "m.n"} {
		if err := r.Register(Tool{Name: n, Handler: h, Secret: []string{"s"}, Params: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Register(Tool{Name: "a.b"}); code(err) != CodeToolExists {
		t.Errorf("duplicate Register = %v, want tool_exists", err)
	}
	if got := fmt.Sprint(r.Names()); got != "[a.b m.n z.z]" {
		t.Errorf("Names() = %s", got)
	}
	tool, ok := r.Lookup("a.b")
	if !ok || tool.Name != "a.b" {
		t.Fatalf("Lookup = %+v, %v", tool, ok)
	}
	tool.Secret[0] = "changed"
	tool.Params[0] = '['
	again, _ := r.Lookup("a.b")
	if again.Secret[0] != "s" || string(again.Params) != "{}" {
		t.Errorf("Lookup shares memory with the registry: %+v", again)
	}
	if err := r.Replace(Tool{Name: "a.b", Description: "new"}); err != nil {
		t.Fatal(err)
	}
	if tool, _ := r.Lookup("a.b"); tool.Description != "new" {
		t.Errorf("Replace didn't replace: %+v", tool)
	}
	if !r.Remove("a.b") || r.Remove("a.b") {
		t.Error("Remove should report true then false")
	}
}

func TestRegisterCopiesTool(t *testing.T) {
	params := []byte(`{"type":"object","required":["x"]}`)
	secret := []string{"x"}
	var r Registry
	if err := r.Register(Tool{Name: "a.b", Params: params, Secret: secret, Handler: (&recorder{}).handle}); err != nil {
		t.Fatal(err)
	}
	copy(params, `{"type":"string"            }`)
	secret[0] = "y"
	tool, _ := r.Lookup("a.b")
	if tool.Secret[0] != "x" || !strings.Contains(string(tool.Params), "required") {
		t.Errorf("registry kept the caller's slices: %+v", tool)
	}
	if _, err := r.Prepare(context.Background(), "a.b", map[string]any{"x": 1.0}, nil); err != nil {
		t.Errorf("the compiled schema changed: %v", err)
	}
}

func TestConfirm(t *testing.T) {
	rec := &recorder{}
	r := newRegistry(t, payTool(rec))
	params := map[string]any{"amount": 42.5, "note": "table 4"}
	p, err := r.Prepare(context.Background(), "payments.confirm", params, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tool() != "payments.confirm" || p.Sentence() != "Pay 42.5?" {
		t.Errorf("Tool %q Sentence %q", p.Tool(), p.Sentence())
	}
	params["amount"] = 1e9 // changing the caller's map after Prepare changes nothing
	res, err := p.Confirm(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Value["paid"] != 42.5 || rec.params["amount"] != 42.5 {
		t.Errorf("result %v, handler params %v", res.Value, rec.params)
	}
	if p.Cancel() {
		t.Error("Cancel after Confirm reported true")
	}
	res2, err2 := p.Confirm(context.Background())
	if err2 != nil || res2.Value["paid"] != 42.5 || rec.calls.Load() != 1 {
		t.Errorf("second Confirm = %v, %v; calls %d", res2, err2, rec.calls.Load())
	}
}

func TestConfirmOnceConcurrently(t *testing.T) {
	rec := &recorder{}
	release := make(chan struct{})
	tool := payTool(rec)
	tool.Handler = func(ctx context.Context, req Request) (Result, error) {
		<-release
		return rec.handle(ctx, req)
	}
	r := newRegistry(t, tool)
	p, err := r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": 1.0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	results := make([]Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { results[i], errs[i] = p.Confirm(context.Background()) })
	}
	close(release)
	wg.Wait()
	if got := rec.calls.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
	for i := range n {
		if errs[i] != nil || results[i].Value["paid"] != 1.0 {
			t.Errorf("call %d = %v, %v", i, results[i], errs[i])
		}
	}
}

func TestConfirmRacesCancel(t *testing.T) {
	for range 50 {
		rec := &recorder{}
		r := newRegistry(t, payTool(rec))
		p, _ := r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": 1.0}, nil)
		var wg sync.WaitGroup
		var cancelled atomic.Bool
		var confirmErr error
		wg.Go(func() { cancelled.Store(p.Cancel()) })
		wg.Go(func() { _, confirmErr = p.Confirm(context.Background()) })
		wg.Wait()
		ran := rec.calls.Load() == 1
		if ran == cancelled.Load() {
			t.Fatalf("ran=%v cancelled=%v: exactly one must win", ran, cancelled.Load())
		}
		if !ran && code(confirmErr) != CodeCancelled {
			t.Fatalf("Confirm after Cancel = %v", confirmErr)
		}
	}
}

func TestCancel(t *testing.T) {
	rec := &recorder{}
	r := newRegistry(t, payTool(rec))
	p, _ := r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": 1.0}, nil)
	if !p.Cancel() || p.Cancel() {
		t.Error("Cancel should report true once")
	}
	_, err := p.Confirm(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeCancelled || e.Issue() != "" {
		t.Errorf("Confirm after Cancel = %v", err)
	}
	if rec.calls.Load() != 0 {
		t.Error("a cancelled press ran its handler")
	}
}

func TestConfirmDoneContext(t *testing.T) {
	rec := &recorder{}
	r := newRegistry(t, payTool(rec))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Prepare(ctx, "payments.confirm", map[string]any{"amount": 1.0}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Prepare with a done context = %v", err)
	}
	p, _ := r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": 1.0}, nil)
	if _, err := p.Confirm(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Confirm with a done context = %v", err)
	}
	if rec.calls.Load() != 0 {
		t.Fatal("handler ran with a done context")
	}
	// The press is still pending.
	if _, err := p.Confirm(context.Background()); err != nil || rec.calls.Load() != 1 {
		t.Errorf("later Confirm = %v, calls %d", err, rec.calls.Load())
	}
}

func TestHandlerFailed(t *testing.T) {
	notFound := errors.New("not_found")
	tests := []struct {
		name    string
		handler Handler
		is      error
	}{
		{"error", func(context.Context, Request) (Result, error) { return Result{Update: "x"}, notFound }, notFound},
		{"panic", func(context.Context, Request) (Result, error) { panic("boom") }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRegistry(t, Tool{Name: "a.b", Handler: tt.handler})
			p, err := r.Prepare(context.Background(), "a.b", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Confirm(context.Background())
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeHandlerFailed || e.Issue() != "handler_failed" || e.Err == nil {
				t.Fatalf("Confirm = %v", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
			if res.Update != "" {
				t.Errorf("a failed handler's result was returned: %+v", res)
			}
		})
	}
}

func TestToolChanged(t *testing.T) {
	for _, change := range []string{"replace", "remove"} {
		t.Run(change, func(t *testing.T) {
			rec := &recorder{}
			r := newRegistry(t, payTool(rec))
			p, _ := r.Prepare(context.Background(), "payments.confirm", map[string]any{"amount": 1.0}, nil)
			if change == "replace" {
				tool := payTool(rec)
				tool.Confirm = Template("Pay {amount} and tip?")
				if err := r.Replace(tool); err != nil {
					t.Fatal(err)
				}
			} else {
				r.Remove("payments.confirm")
			}
			_, err := p.Confirm(context.Background())
			if code(err) != CodeToolChanged || rec.calls.Load() != 0 {
				t.Errorf("Confirm = %v, calls %d", err, rec.calls.Load())
			}
		})
	}
}

func TestStreamCannotChangeConfirmation(t *testing.T) {
	// Whatever the params say, the sentence and whether one is needed come
	// from the registry alone.
	rec := &recorder{}
	tool := payTool(rec)
	tool.Params = nil
	r := newRegistry(t, tool)
	for _, params := range []map[string]any{
		{"amount": 1.0, "confirm": false},
		{"amount": 1.0, "confirmation": "Skip?", "skipConfirmation": true},
		{"amount": 1.0, "sentence": ""},
	} {
		p, err := r.Prepare(context.Background(), "payments.confirm", params, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.Sentence() != "Pay 1?" || !p.NeedsConfirmation() {
			t.Errorf("params %v changed the confirmation to %q", params, p.Sentence())
		}
	}
}

func TestConcurrentRegistry(t *testing.T) {
	var r Registry
	h := (&recorder{}).handle
	var wg sync.WaitGroup
	for i := range 8 {
		name := fmt.Sprintf("t.n%d", i)
		wg.Go(func() {
			for range 20 {
				_ = r.Replace(Tool{Name: name, Handler: h, Confirm: Template("Run?")})
				if p, err := r.Prepare(context.Background(), name, nil, nil); err == nil {
					_, _ = p.Confirm(context.Background())
				}
				_ = r.Names()
				r.Remove(name)
			}
		})
	}
	wg.Wait()
}

func TestErrorText(t *testing.T) {
	e := &Error{Code: CodeUnknownTool, Message: "no tool"}
	if e.Error() != "confirm: no tool" || e.Unwrap() != nil {
		t.Errorf("Error() = %q", e.Error())
	}
	if (&Error{Code: CodeInvalidTool}).Issue() != "" {
		t.Error("registration errors are not renderer issues")
	}
	if s := Template("Pay?").String(); s != `template "Pay?"` {
		t.Errorf("String() = %q", s)
	}
	if (Confirmation{}).String() != "none" || Func(func(context.Context, map[string]any) (string, error) { return "", nil }).String() != "func" {
		t.Error("String() of none or func")
	}
}

func FuzzTemplate(f *testing.F) {
	f.Add("Pay {amount}?", "42.5")
	f.Add("{a}{b}{", "{a}")
	f.Add("{{x}}", "}")
	f.Add("{_}{a_1}{1a}", "\x00\xff")
	f.Fuzz(func(t *testing.T, tmpl, value string) {
		params := map[string]any{}
		for _, p := range placeholders(tmpl) {
			if tmpl[p.start] != '{' || tmpl[p.end-1] != '}' || tmpl[p.start+1:p.end-1] != p.name {
				t.Fatalf("bad placeholder %+v in %q", p, tmpl)
			}
			params[p.name] = value
		}
		s, err := Template(tmpl).Sentence(context.Background(), params)
		if err != nil {
			if tmpl == "" || s != "" {
				t.Fatalf("Sentence(%q) = %q, %v", tmpl, s, err)
			}
			return
		}
		// The sentence is the template with each placeholder replaced by
		// the value's text, and nothing else changed.
		want := tmpl
		ph := placeholders(tmpl)
		for i := len(ph) - 1; i >= 0; i-- {
			want = want[:ph[i].start] + isolate(value) + want[ph[i].end:]
		}
		if tmpl != "" && s != want {
			t.Fatalf("Sentence(%q) with %q = %q, want %q", tmpl, value, s, want)
		}
	})
}

func FuzzPrepare(f *testing.F) {
	f.Add(`{"amount": 42.5, "note": "hi"}`)
	f.Add(`{"amount": "x", "card": "1234", "email": "@"}`)
	f.Add(`{"amount": 1e308, "note": null, "extra": [1, {"a": []}]}`)
	f.Add(`{}`)
	r, err := NewRegistry(payTool(&recorder{}))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, paramsJSON string) {
		var params map[string]any
		if json.Unmarshal([]byte(paramsJSON), &params) != nil {
			return
		}
		p, err := r.Prepare(context.Background(), "payments.confirm", params, nil)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == "" || e.Issue() == "" {
				t.Fatalf("Prepare error %v has no code", err)
			}
			if c, ok := params["card"].(string); ok && len(c) > 3 && strings.Contains(e.Error(), c) {
				t.Fatalf("secret card %q leaked in %v", c, err)
			}
			return
		}
		if !strings.HasPrefix(p.Sentence(), "Pay ") {
			t.Fatalf("sentence %q", p.Sentence())
		}
	})
}
