package screens

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// show_screen shows a person a screen only when the whole screen is right:
// a screen with a rejected line, or a button whose params its tool would
// refuse, is refused as a whole, with each line's error, so that the agent
// fixes it at once and the person never sees half a screen, nor a button
// that can only fail.

// codeInvalidParams is the issue of an McpMutation whose params its tool's
// input schema refuses.
const codeInvalidParams = "invalid_params"

// screenExample is a complete screen, for show_screen's description.
const screenExample = `root = Card([title, amount, note, pay])
title = Heading("Confirm payment")
$amount = 42.5
amount = Text($amount, format="currency", currency="USD")
$note = ""
note = Input($note, label="Note for merchant", required=true)
pay = Button("Pay", action="pay", variant="primary")
payIt = McpMutation(pay, tool="payments.confirm", params={amount: $amount, note: $note})`

// checkScreen reads stream as show_screen would show it and returns every
// error: the lines the reader rejects, then each McpMutation whose params
// break its tool's input schema. A param read from a $key that a field
// edits is checked when the person presses, since its value is theirs.
func (s *Part) checkScreen(ctx context.Context, stream string) []screen.Issue {
	doc := screen.Parse(stream, s.screenOptions())
	var out []screen.Issue
	for _, is := range doc.Issues() {
		if is.Severity == screen.SeverityError {
			out = append(out, is)
		}
	}
	for _, m := range doc.Mutations() {
		if _, ok := s.screenTools.Lookup(m.Tool); !ok {
			continue // unknown_tool is the reader's
		}
		fed := map[string]bool{} // params the person's fields give
		edited := map[string]bool{}
		for _, f := range doc.FieldsReadBy(m) {
			edited[doc.Edits(f.ID)] = true
		}
		params := make(map[string]any, len(m.Params))
		for k, v := range m.Params {
			if ref, ok := v.(screen.StateRef); ok {
				v, _ = doc.State(string(ref))
				if edited[string(ref)] {
					fed[k] = true
				}
			}
			params[k] = v
		}
		pend, err := s.screenTools.Prepare(ctx, m.Tool, params, nil)
		if err == nil {
			pend.Cancel()
			continue
		}
		var ce *confirm.Error
		if !errors.As(err, &ce) || ce.Code != confirm.CodeInvalidParams {
			continue
		}
		var wrong []string
		for _, pi := range ce.Issues {
			top, _, _ := strings.Cut(pi.Path, ".")
			if pi.Path != "" && fed[top] {
				continue
			}
			if pi.Path == "" {
				wrong = append(wrong, pi.Message)
			} else {
				wrong = append(wrong, pi.Path+": "+pi.Message)
			}
		}
		if len(wrong) == 0 {
			continue
		}
		sort.Strings(wrong)
		out = append(out, screen.Issue{Line: m.Line, Code: codeInvalidParams, ID: m.ID, Severity: screen.SeverityError,
			Message: fmt.Sprintf("the params of %q don't match the input schema of %s (%s): %s; give each param the schema names, of its type", m.ID, m.Tool, s.paramsHint(m.Tool), strings.Join(wrong, "; "))})
	}
	return out
}

// paramsHint names the params a tool's schema declares, for a message.
func (s *Part) paramsHint(name string) string {
	t, ok := s.screenTools.Lookup(name)
	if !ok || len(t.Params) == 0 {
		return "any params"
	}
	return "schema " + oneLine(string(t.Params))
}

// refusedScreen is show_screen's answer to a screen it does not show.
func refusedScreen(issues []screen.Issue) *tool.Reply[any] {
	var b strings.Builder
	b.WriteString("Not shown: the screen has errors, and a person sees a screen only once it is whole and right. Fix every line below and call show_screen again with the whole screen:")
	for _, is := range issues {
		if is.Line > 0 {
			fmt.Fprintf(&b, "\n- line %d: %s: %s", is.Line, is.Code, is.Message)
		} else {
			fmt.Fprintf(&b, "\n- at the end: %s: %s", is.Code, is.Message)
		}
	}
	return &tool.Reply[any]{IsError: true, Text: b.String(), Out: rejectedScreen{
		Code:    "screen_rejected",
		Message: "the screen has errors and was not shown; fix the lines in issues and call show_screen again with the whole screen",
		Issues:  issues,
	}}
}

// shownScreen is show_screen's answer when the screen is shown.
type shownScreen struct {
	Screen     string         `json:"screen" jsonschema:"screen id"`
	URL        string         `json:"url" jsonschema:"web page where a person sees the screen"`
	Components int            `json:"components" jsonschema:"components shown"`
	Rejected   []screen.Issue `json:"rejected" jsonschema:"lines that were rejected, with line, code and message"`
	Outline    string         `json:"outline" jsonschema:"the screen as text"`
}

// rejectedScreen is show_screen's answer when the screen is refused as a
// whole: the refusal's code and every line's error.
type rejectedScreen struct {
	Code    string         `json:"code" jsonschema:"screen_rejected"`
	Message string         `json:"message"`
	Issues  []screen.Issue `json:"issues" jsonschema:"each line's error, with line, code and message"`
}

// showScreenOutput is show_screen's output schema: a shown screen or a
// refusal, derived from their types, with objects left open as every
// tool's answers are.
var showScreenOutput = sync.OnceValue(func() json.RawMessage {
	opts := tool.SchemaOptions()
	opts.TypeSchemas[reflect.TypeFor[screen.Issue]()] = api.IssueSchema()
	alts := make([]*jsonschema.Schema, 0, 2)
	for _, t := range []reflect.Type{reflect.TypeFor[shownScreen](), reflect.TypeFor[rejectedScreen]()} {
		s, err := tool.SchemaFor(t, opts)
		if err != nil {
			panic(err) // the types are fixed; TestShowScreenOutputSchema builds it
		}
		tool.OpenObjects(s)
		alts = append(alts, s)
	}
	b, err := json.Marshal(&jsonschema.Schema{Type: "object", AnyOf: alts})
	if err != nil {
		panic(err)
	}
	return b
})

// replaceScreen removes the screen id of p's that a new screen replaces.
func (s *Part) replaceScreen(ctx context.Context, p store.Principal, id string) error {
	sc, ok := s.screenFor(ctx, p, id)
	if !ok || sc.owner.ID != p.ID {
		return tool.Errorf("not_found", "you have no screen %q open to replace; pass the screen id a show_screen result gave you, or leave replaces out", id)
	}
	return s.removeScreen(ctx, sc)
}
