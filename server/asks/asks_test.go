package asks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gate lets every person oversee every agent but "p_stranger".
type gate struct{}

func (gate) Oversees(_ context.Context, p store.Principal, owner string) bool {
	return p.ID == owner || (p.Kind == store.KindHuman && p.ID != "p_stranger")
}
func (gate) OwnedEvent(typ, owner string, data []byte) event.Event {
	return event.Event{Type: typ, Owner: owner, Data: data}
}

// Routed lets every person decide a question asked of no group, and only
// p_member one asked of a group.
func (gate) Routed(_ context.Context, p store.Principal, _, group string) error {
	if group != "" && p.ID != "p_member" {
		return tool.Errorf("not_routed", "this decision is asked of group %s", group)
	}
	return nil
}

// CountRouted counts what Routed lets p decide.
func (g gate) CountRouted(ctx context.Context, p store.Principal, filed []host.Filed) int {
	n := 0
	for _, f := range filed {
		if g.Routed(ctx, p, f.By, f.Group) == nil {
			n++
		}
	}
	return n
}
func (gate) PrincipalNames(context.Context) map[string]string {
	return map[string]string{"p_ada": "Ada", "p_agent": "bot"}
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var (
	agent = store.Principal{ID: "p_agent", Kind: store.KindAgent}
	ada   = store.Principal{ID: "p_ada", Kind: store.KindHuman}
)

// newPart builds the part on a fresh SQLite store with a clock the test
// moves; its sweeper runs only when the test calls Sweep (an hour apart).
func newPart(t *testing.T) (*Part, *clock, *event.Bus) { return newPartTB(t) }

func newPartTB(t testing.TB) (*Part, *clock, *event.Bus) {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	bus := event.New(event.Options{})
	t.Cleanup(bus.Close)
	p, err := New(t.Context(), Deps{Gate: gate{}, Asks: db.Asks(), Groups: db.Groups(), Audit: db.Audit(), Bus: bus, Tools: tool.NewRegistry(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: c.now, Config: Config{Sweep: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, c, bus
}

func ptr[T any](v T) *T { return &v }

func code(err error) string {
	var te *tool.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

func TestNewAsk(t *testing.T) {
	l := DefaultLimits
	for _, tc := range []struct {
		name     string
		r        Request
		code     string
		kind     string
		fallback string
	}{
		{"yes_no by default", Request{Question: " Go? "}, "", store.AskYesNo, ""},
		{"choice by default with options", Request{Question: "Which?", Options: []string{"a", " b "}}, "", store.AskChoice, ""},
		{"text", Request{Question: "Why?", Answer: "text"}, "", store.AskText, ""},
		{"deadline defaults to decline", Request{Question: "Go?", DeadlineSeconds: ptr[int64](60)}, "", store.AskYesNo, FallbackDecline},
		{"yes_no falls back to approve", Request{Question: "Go?", DeadlineSeconds: ptr[int64](60), Fallback: "approve"}, "", store.AskYesNo, FallbackApprove},
		{"choice falls back to an option", Request{Question: "Which?", Options: []string{"a", "b"}, DeadlineSeconds: ptr[int64](1), Fallback: "b"}, "", store.AskChoice, "b"},
		{"empty question", Request{Question: " \n"}, "invalid_value", "", ""},
		{"question not UTF-8", Request{Question: "\xff"}, "invalid_value", "", ""},
		{"question too long", Request{Question: strings.Repeat("é", 1001)}, "limit_exceeded", "", ""},
		{"reason too long", Request{Question: "?", Reason: strings.Repeat("r", 2001)}, "limit_exceeded", "", ""},
		{"too many options", Request{Question: "?", Options: strings.Split(strings.Repeat("x,", 20)+"y", ",")}, "limit_exceeded", "", ""},
		{"option too long", Request{Question: "?", Options: []string{strings.Repeat("o", 201), "b"}}, "limit_exceeded", "", ""},
		{"empty option", Request{Question: "?", Options: []string{"a", " "}}, "invalid_value", "", ""},
		{"hidden character in an option", Request{Question: "?", Options: []string{"a\u200b", "b"}}, "invalid_value", "", ""},
		{"options equal once trimmed", Request{Question: "?", Options: []string{"a", "a "}}, "invalid_value", "", ""},
		{"one option", Request{Question: "?", Answer: "choice", Options: []string{"a"}}, "invalid_value", "", ""},
		{"choice without options", Request{Question: "?", Answer: "choice"}, "invalid_value", "", ""},
		{"yes_no with options", Request{Question: "?", Answer: "yes_no", Options: []string{"a", "b"}}, "invalid_value", "", ""},
		{"unknown kind", Request{Question: "?", Answer: "maybe"}, "invalid_value", "", ""},
		{"fallback without deadline", Request{Question: "?", Fallback: "decline"}, "invalid_value", "", ""},
		{"deadline too short", Request{Question: "?", DeadlineSeconds: ptr[int64](0)}, "invalid_value", "", ""},
		{"deadline negative", Request{Question: "?", DeadlineSeconds: ptr[int64](-5)}, "invalid_value", "", ""},
		{"deadline too long", Request{Question: "?", DeadlineSeconds: ptr[int64](30*24*3600 + 1)}, "invalid_value", "", ""},
		{"deadline overflowing", Request{Question: "?", DeadlineSeconds: ptr[int64](1 << 62)}, "invalid_value", "", ""},
		{"choice fallback not an option", Request{Question: "?", Options: []string{"a", "b"}, DeadlineSeconds: ptr[int64](9), Fallback: "c"}, "invalid_value", "", ""},
		{"choice fallback approve", Request{Question: "?", Options: []string{"a", "b"}, DeadlineSeconds: ptr[int64](9), Fallback: "approve"}, "invalid_value", "", ""},
		{"text fallback approve", Request{Question: "?", Answer: "text", DeadlineSeconds: ptr[int64](9), Fallback: "approve"}, "invalid_value", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := newAsk(tc.r, l)
			if code(err) != tc.code || (tc.code == "" && err != nil) {
				t.Fatalf("newAsk = %v, want code %q", err, tc.code)
			}
			if tc.code != "" {
				return
			}
			if a.Kind != tc.kind || a.Fallback != tc.fallback || a.Question != strings.TrimSpace(tc.r.Question) {
				t.Errorf("newAsk = %+v, want kind %s and fallback %q", a, tc.kind, tc.fallback)
			}
		})
	}
}

func TestAnswerOf(t *testing.T) {
	yn := store.Ask{Kind: store.AskYesNo}
	ch := store.Ask{Kind: store.AskChoice, Options: []string{"Post", "Courier"}}
	tx := store.Ask{Kind: store.AskText}
	for _, tc := range []struct {
		a    store.Ask
		raw  string // "" sends none
		want string
		code string
	}{
		{yn, "", Yes, ""},
		{yn, `"no"`, No, ""},
		{yn, `" YES "`, Yes, ""},
		{yn, `false`, No, ""},
		{yn, `"maybe"`, "", "invalid_value"},
		{yn, `3`, "", "invalid_value"},
		{ch, `"Courier"`, "Courier", ""},
		{ch, `"courier"`, "", "invalid_value"},
		{ch, "", "", "invalid_value"},
		{ch, `true`, "", "invalid_value"},
		{tx, `"  Refund it.  "`, "Refund it.", ""},
		{tx, `" "`, "", "invalid_value"},
		{tx, "", "", "invalid_value"},
		{tx, `"` + strings.Repeat("w", 1001) + `"`, "", "limit_exceeded"},
		{tx, `{"x":1}`, "", "invalid_value"},
		{tx, `not json`, "", "invalid_value"},
	} {
		var raw json.RawMessage
		if tc.raw != "" {
			raw = json.RawMessage(tc.raw)
		}
		got, err := answerOf(tc.a, raw, 1000)
		if got != tc.want || code(err) != tc.code || (tc.code == "" && err != nil) {
			t.Errorf("answerOf(%s, %s) = %q, %v; want %q, %q", tc.a.Kind, tc.raw, got, err, tc.want, tc.code)
		}
	}
}

// FuzzRequest feeds arbitrary requests and answers: nothing panics, an
// accepted question keeps its bounds, and an accepted answer is one the
// question allows.
func FuzzRequest(f *testing.F) {
	f.Add("Which account?", "Operating\nReserve", "", "", int64(60), "Reserve", `"Reserve"`, "")
	f.Add("Go?", "", "yes_no", "", int64(0), "", `"no"`, "finance")
	f.Add("Why?", "", "text", "because", int64(-1), "decline", `"\u202e"`, " ops.team-2 ")
	f.Add("\xff", "a\nb\na", "choice", "\u202e", int64(1<<40), "approve", `true`, "Finance\u202e")
	f.Fuzz(func(t *testing.T, q, opts, kind, reason string, secs int64, fallback, answer, group string) {
		r := Request{Question: q, Answer: kind, Reason: reason, Fallback: fallback, Group: group}
		if opts != "" {
			r.Options = strings.Split(opts, "\n")
		}
		if secs != 0 {
			r.DeadlineSeconds = &secs
		}
		a, err := newAsk(r, DefaultLimits)
		if err != nil {
			if c := code(err); c != "invalid_value" && c != "limit_exceeded" {
				t.Fatalf("refusal %v has code %q", err, c)
			}
			return
		}
		if !utf8.ValidString(a.Question) || len(a.Question) > DefaultLimits.QuestionBytes || a.Question == "" {
			t.Fatalf("accepted question %q", a.Question)
		}
		if a.Group != "" && store.CheckGroupName(a.Group) != nil {
			t.Fatalf("accepted group %q", a.Group)
		}
		a.ID, a.Asker = "ask_f", "p_f"
		if err := a.Check(); err != nil {
			t.Fatalf("accepted a question the store refuses: %v", err)
		}
		if fb := fallbackAnswer(a); fb != "" {
			if _, err := answerOf(a, json.RawMessage(mustJSON(fb)), DefaultLimits.AnswerBytes); err != nil {
				t.Fatalf("the fallback answer %q is not an answer the question allows: %v", fb, err)
			}
		}
		got, err := answerOf(a, json.RawMessage(answer), DefaultLimits.AnswerBytes)
		if err != nil {
			return
		}
		switch a.Kind {
		case store.AskYesNo:
			if got != Yes && got != No {
				t.Fatalf("yes/no answer %q", got)
			}
		case store.AskChoice:
			found := false
			for _, o := range a.Options {
				found = found || o == got
			}
			if !found {
				t.Fatalf("choice answer %q is no option of %q", got, a.Options)
			}
		case store.AskText:
			if got == "" || !utf8.ValidString(got) || len(got) > DefaultLimits.AnswerBytes {
				t.Fatalf("text answer %q", got)
			}
		}
	})
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// A question ends once: the first decision wins, the second is refused
// conflict naming who decided, and the sweeper leaves it alone.
func TestDecideOnce(t *testing.T) {
	p, c, _ := newPart(t)
	a, err := p.Ask(t.Context(), agent, Request{Question: "Go?", DeadlineSeconds: ptr[int64](60)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Decide(t.Context(), store.Principal{ID: "p_stranger", Kind: store.KindHuman}, a, Decision{Approve: true}); code(err) != "not_found" {
		t.Errorf("a person who does not oversee the asker decided: %v", err)
	}
	if _, err := p.Decide(t.Context(), agent, a, Decision{Approve: true}); code(err) != "not_found" {
		t.Errorf("the asking agent answered its own question: %v", err)
	}
	got, err := p.Decide(t.Context(), ada, a, Decision{Approve: true, Answer: json.RawMessage(`"no"`)})
	if err != nil || got.State != store.AskAnswered || got.Answer != No || got.DecidedBy != ada.ID {
		t.Fatalf("Decide = %+v, %v", got, err)
	}
	_, err = p.Decide(t.Context(), store.Principal{ID: "p_ben", Kind: store.KindHuman}, a, Decision{})
	if code(err) != "conflict" || !strings.Contains(err.Error(), `Ada answered "no"`) {
		t.Errorf("second decision: %v", err)
	}
	c.add(time.Hour)
	if n, err := p.Sweep(t.Context()); n != 0 || err != nil {
		t.Errorf("Sweep ended %d decided questions (%v)", n, err)
	}
	o, err := p.Outcome(t.Context(), agent, a.ID)
	if err != nil || o.Status != "answered" || o.Answer != No || o.DecidedBy != ada.ID {
		t.Errorf("Outcome = %+v, %v", o, err)
	}
	if _, err := p.Outcome(t.Context(), store.Principal{ID: "p_other", Kind: store.KindAgent}, a.ID); code(err) != "not_found" {
		t.Errorf("another agent read the outcome: %v", err)
	}
}

// Sweep ends exactly the questions whose deadline passed, each with its
// fallback, and tells the asker on the bus.
func TestSweep(t *testing.T) {
	p, c, bus := newPart(t)
	sub := bus.Subscribe(bus.Seq(), 64, nil)
	defer sub.Close()
	ctx := t.Context()
	decline, _ := p.Ask(ctx, agent, Request{Question: "Ship?", DeadlineSeconds: ptr[int64](10)})
	approve, _ := p.Ask(ctx, agent, Request{Question: "Renew?", DeadlineSeconds: ptr[int64](10), Fallback: "approve"})
	option, _ := p.Ask(ctx, agent, Request{Question: "Carrier?", Options: []string{"Post", "Courier"}, DeadlineSeconds: ptr[int64](10), Fallback: "Post"})
	later, _ := p.Ask(ctx, agent, Request{Question: "Later?", DeadlineSeconds: ptr[int64](3600)})
	never, _ := p.Ask(ctx, agent, Request{Question: "Never?"})
	c.add(9 * time.Second)
	if n, err := p.Sweep(ctx); n != 0 || err != nil {
		t.Fatalf("Sweep before the deadline ended %d (%v)", n, err)
	}
	c.add(time.Second)
	if n, err := p.Sweep(ctx); n != 3 || err != nil {
		t.Fatalf("Sweep at the deadline ended %d (%v), want 3", n, err)
	}
	for _, tc := range []struct {
		a              store.Ask
		status, answer string
	}{
		{decline, "declined", ""}, {approve, "answered", Yes}, {option, "answered", "Post"}, {later, "pending", ""}, {never, "pending", ""},
	} {
		o, err := p.Outcome(ctx, agent, tc.a.ID)
		if err != nil || o.Status != tc.status || o.Answer != tc.answer || (tc.status != "pending" && !strings.HasPrefix(o.Reason, NoDecision)) {
			t.Errorf("%s: Outcome = %+v, %v; want %s %q", tc.a.Question, o, err, tc.status, tc.answer)
		}
	}
	decided := 0
	for {
		ectx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		e, err := sub.Next(ectx)
		cancel()
		if err != nil {
			break
		}
		if e.Type == EventDecided && e.Owner == agent.ID {
			decided++
		}
	}
	if decided != 3 {
		t.Errorf("%d decided events, want 3", decided)
	}
}

// The inbox shows a person the questions of the agents they oversee,
// each with buttons that carry its binding, and counts them; an agent
// counts its own.
func TestInboxAndCount(t *testing.T) {
	p, _, _ := newPart(t)
	ctx := t.Context()
	a, err := p.Ask(ctx, agent, Request{Question: "Which?", Options: []string{"Post", "Courier"}, Reason: "two quotes"})
	if err != nil {
		t.Fatal(err)
	}
	secs, err := p.Inbox(ctx, ada)
	if err != nil || len(secs) != 1 || len(secs[0].Items) != 1 {
		t.Fatalf("Inbox = %+v, %v", secs, err)
	}
	it := secs[0].Items[0]
	if it.Summary != "Which?" || it.Decision == nil || it.Decision.ID() != ItemID(a) || len(it.Actions) != 3 {
		t.Fatalf("card %+v", it)
	}
	for _, act := range it.Actions {
		if act.Values["id"] != ItemID(a) {
			t.Errorf("button %q carries id %q, want %q", act.Label, act.Values["id"], ItemID(a))
		}
	}
	if secs, _ := p.Inbox(ctx, store.Principal{ID: "p_stranger", Kind: store.KindHuman}); len(secs) != 0 {
		t.Errorf("a person who does not oversee the asker sees %+v", secs)
	}
	if n := p.CountOpen(ctx, ada)["questions"]; n != 1 {
		t.Errorf("person's count %d", n)
	}
	if n := p.CountOpen(ctx, agent)["questions"]; n != 1 {
		t.Errorf("agent's count %d", n)
	}
	if n := p.CountOpen(ctx, store.Principal{ID: "p_other", Kind: store.KindAgent})["questions"]; n != 0 {
		t.Errorf("another agent's count %d", n)
	}
	msg, err := it.Decision.Decide(ctx, ada, hostArgs(true, `"Courier"`))
	if err != nil || !strings.Contains(msg, "Courier") {
		t.Errorf("Decide = %q, %v", msg, err)
	}
	if n := p.CountOpen(ctx, ada)["questions"]; n != 0 {
		t.Errorf("count after the answer %d", n)
	}
}

// A question's binding changes with anything its card shows.
func TestBinding(t *testing.T) {
	base := store.Ask{Kind: store.AskChoice, Question: "Which?", Options: []string{"a", "b"}, Reason: "r"}
	seen := map[string]bool{binding(base): true}
	for _, change := range []func(*store.Ask){
		func(a *store.Ask) { a.Question = "Which?!" },
		func(a *store.Ask) { a.Options = []string{"b", "a"} },
		func(a *store.Ask) { a.Options = []string{"a", "b", "c"} },
		func(a *store.Ask) { a.Reason = "" },
		func(a *store.Ask) { a.Fallback = "a" },
		func(a *store.Ask) { a.Deadline = time.Unix(1, 0) },
		func(a *store.Ask) { a.Kind = store.AskText },
	} {
		a := base
		a.Options = append([]string(nil), base.Options...)
		change(&a)
		b := binding(a)
		if seen[b] {
			t.Errorf("binding %s repeats for %+v", b, a)
		}
		seen[b] = true
	}
}

func hostArgs(approve bool, answer string) host.DecideArgs {
	return host.DecideArgs{Approve: approve, Values: map[string]json.RawMessage{"answer": json.RawMessage(answer)}}
}

// Two nodes sweeping one store at once end each due question once: the
// store's compare-and-set decides which node's sweep ends it.
func TestSweepOnceAcrossNodes(t *testing.T) {
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	var nodes []*Part
	for range 2 {
		bus := event.New(event.Options{})
		defer bus.Close()
		p, err := New(t.Context(), Deps{Gate: gate{}, Asks: db.Asks(), Groups: db.Groups(), Audit: db.Audit(), Bus: bus, Tools: tool.NewRegistry(),
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: c.now, Config: Config{Sweep: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		nodes = append(nodes, p)
	}
	const questions = 40
	for i := range questions {
		if _, err := nodes[i%2].Ask(t.Context(), store.Principal{ID: fmt.Sprintf("p_agent%d", i%4), Kind: store.KindAgent},
			Request{Question: "Go?", DeadlineSeconds: ptr[int64](5)}); err != nil {
			t.Fatal(err)
		}
	}
	c.add(5 * time.Second)
	var wg sync.WaitGroup
	ended := make([]int, len(nodes))
	for i, p := range nodes {
		wg.Go(func() {
			n, err := p.Sweep(t.Context())
			if err != nil {
				t.Error(err)
			}
			ended[i] = n
		})
	}
	wg.Wait()
	if ended[0]+ended[1] != questions {
		t.Errorf("the nodes ended %d and %d questions, want %d in all", ended[0], ended[1], questions)
	}
	recs, err := db.Audit().ListAudit(t.Context(), store.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	expired := 0
	for _, r := range recs {
		if r.Action == "question.expire" {
			expired++
		}
	}
	if expired != questions {
		t.Errorf("%d expiries audited, want %d", expired, questions)
	}
}

// A question may name a group: the name must be one and the group must
// have members; then only the group's members (here p_member) may answer
// it, and a supervisor outside the group is refused not_routed.
func TestQuestionAskedOfGroup(t *testing.T) {
	p, c, _ := newPart(t)
	ctx := t.Context()
	for _, tc := range []struct{ group, code string }{
		{"Finance Team", "invalid_value"},
		{strings.Repeat("f", 65), "invalid_value"},
		{"finance", "invalid_value"}, // no members yet
	} {
		if _, err := p.Ask(ctx, agent, Request{Question: "Pay?", Group: tc.group}); code(err) != tc.code {
			t.Errorf("group %q: %v, want %s", tc.group, err, tc.code)
		}
	}
	if err := p.Groups.AddGroupMember(ctx, store.GroupMember{Group: "finance", PrincipalID: "p_member", AddedAt: c.now()}); err != nil {
		t.Fatal(err)
	}
	a, err := p.Ask(ctx, agent, Request{Question: "Pay invoice 7?", Group: " finance "})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Asks.Ask(ctx, a.ID); got.Group != "finance" {
		t.Fatalf("stored group = %q, want finance", got.Group)
	}
	if d := p.decision(a); d.Group != "finance" || d.Bound["group"] != "finance" {
		t.Errorf("card decision names group %q, binds %q", d.Group, d.Bound["group"])
	}
	if _, err := p.Decide(ctx, ada, a, Decision{Approve: true}); code(err) != "not_routed" {
		t.Fatalf("a supervisor outside the group answered: %v, want not_routed", err)
	}
	member := store.Principal{ID: "p_member", Kind: store.KindHuman}
	got, err := p.Decide(ctx, member, a, Decision{Approve: true})
	if err != nil || got.State != store.AskAnswered || got.DecidedBy != "p_member" {
		t.Fatalf("the member's answer: %+v, %v", got, err)
	}
}

// The operator's default deadline applies to a question that names
// neither deadline_seconds nor fallback, and declines it; a question's
// own deadline is kept.
func TestDefaultDeadline(t *testing.T) {
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	bus := event.New(event.Options{})
	t.Cleanup(bus.Close)
	p, err := New(t.Context(), Deps{Gate: gate{}, Asks: db.Asks(), Groups: db.Groups(), Audit: db.Audit(), Bus: bus, Tools: tool.NewRegistry(),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: c.now, Config: Config{Sweep: time.Hour, DefaultDeadline: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx := t.Context()
	plain, err := p.Ask(ctx, agent, Request{Question: "Ship?"})
	if err != nil || !plain.Deadline.Equal(c.now().Add(time.Hour)) || plain.Fallback != FallbackDecline {
		t.Fatalf("question without a deadline: %+v %v; want the default hour, declining", plain, err)
	}
	own, err := p.Ask(ctx, agent, Request{Question: "Renew?", DeadlineSeconds: ptr[int64](7200), Fallback: "approve"})
	if err != nil || !own.Deadline.Equal(c.now().Add(2*time.Hour)) {
		t.Fatalf("question with its own deadline: %+v %v", own, err)
	}
	c.add(time.Hour)
	if n, err := p.Sweep(ctx); n != 1 || err != nil {
		t.Fatalf("Sweep after the default hour ended %d (%v), want 1", n, err)
	}
	if o, err := p.Outcome(ctx, agent, plain.ID); err != nil || o.Status != "declined" {
		t.Fatalf("Outcome = %+v, %v; want declined", o, err)
	}
}
