package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// financePeople adds n people to group finance and signs each in.
type signedIn struct {
	p      store.Principal
	cookie *http.Cookie
	csrf   string
}

func financePeople(t *testing.T, f *assenttest.Kit, names ...string) []signedIn {
	t.Helper()
	var out []signedIn
	for _, n := range names {
		_, p := f.Issue(store.KindHuman, n)
		if err := f.DB.Groups().AddGroupMember(t.Context(), store.GroupMember{Group: "finance", PrincipalID: p.ID, AddedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		c, csrf := f.SignInAs(p.ID)
		out = append(out, signedIn{p, c, csrf})
	}
	return out
}

// answerAs sends person's answer to the question card it, and returns
// the status and outcome.
func answerAs(t *testing.T, f *assenttest.Kit, who signedIn, it api.InboxItem, answer any) (int, api.InboxOutcome) {
	t.Helper()
	var out api.InboxOutcome
	body := map[string]any{"decision": "approve"}
	if answer != nil {
		body["values"] = map[string]any{"answer": answer}
	}
	code := session(t, f, who.cookie, who.csrf, "POST", "/v1/inbox/"+url.PathEscape(it.ID)+"/decision", body, &out)
	return code, out
}

// The rule of a question that needs several people, per kind of answer:
// each case's answers are given in order by different people, and the
// question ends (or stays open) as the documented rule says.
func TestQuestionQuorumRule(t *testing.T) {
	f := assenttest.StartListening(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	people := financePeople(t, f, "Ada", "Ben", "Cy")
	tests := []struct {
		name    string
		args    map[string]any
		answers []any
		state   string // the question's state after the answers
		answer  string
	}{
		{"two yes make yes", map[string]any{"answer": "yes_no"}, []any{"yes", "yes"}, store.AskAnswered, "yes"},
		{"one yes waits", map[string]any{"answer": "yes_no"}, []any{"yes"}, store.AskOpen, ""},
		{"one no makes no", map[string]any{"answer": "yes_no"}, []any{"yes", "no"}, store.AskAnswered, "no"},
		{"a first no makes no", map[string]any{"answer": "yes_no"}, []any{"no"}, store.AskAnswered, "no"},
		{"two of the same choice", map[string]any{"options": []string{"Operating", "Reserve"}}, []any{"Reserve", "Operating", "Reserve"}, store.AskAnswered, "Reserve"},
		{"different choices wait", map[string]any{"options": []string{"Operating", "Reserve"}}, []any{"Reserve", "Operating"}, store.AskOpen, ""},
		{"the same text", map[string]any{"answer": "text"}, []any{"INV-7", " INV-7 "}, store.AskAnswered, "INV-7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{"question": "Pay " + tt.name + "?", "group": "finance", "quorum": 2}
			for k, v := range tt.args {
				args[k] = v
			}
			id, _ := ask(t, cs, args)
			for i, ans := range tt.answers {
				it, ok := question(t, f, people[i].cookie, people[i].csrf, id)
				if !ok {
					t.Fatalf("answer %d: the question is not in %s's inbox", i, people[i].p.Name)
				}
				if code, out := answerAs(t, f, people[i], it, ans); code != http.StatusOK || out.Error != nil {
					t.Fatalf("answer %d (%v): %d %+v", i, ans, code, out)
				}
			}
			got, err := f.DB.Asks().Ask(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tt.state || got.Answer != tt.answer || len(got.Answers) != len(tt.answers) {
				t.Fatalf("question = %s %q with %d answers, want %s %q", got.State, got.Answer, len(got.Answers), tt.state, tt.answer)
			}
		})
	}
}

// A question that needs two people: the card and GET /v1/inbox say who
// answered and how many more are needed, the same person cannot answer
// twice (already_answered), the agent waits until the second person's
// answer and then hears it.
func TestQuestionNeedsTwoPeople(t *testing.T) {
	f := assenttest.StartListening(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	people := financePeople(t, f, "Ada", "Ben")
	ada, ben := people[0], people[1]

	for _, q := range []any{1.5, 0, 17, "2"} {
		if out, isErr := assenttest.CallTool(t, cs, "approvals_request", map[string]any{"question": "Pay?", "group": "finance", "quorum": q}); !isErr {
			t.Errorf("quorum %v accepted: %v", q, out)
		}
	}
	if out, isErr := assenttest.CallTool(t, cs, "approvals_request", map[string]any{"question": "Pay?", "group": "finance", "quorum": 3}); !isErr || !strings.Contains(fmt.Sprint(out), "fewer than the 3 people") {
		t.Errorf("a quorum over the group's members: %v", out)
	}

	id, _ := ask(t, cs, map[string]any{"question": "Pay invoice INV-9 of 9,400.00 EUR?", "group": "finance", "quorum": 2})
	it, ok := question(t, f, ada.cookie, ada.csrf, id)
	if !ok || it.Needs != 2 || it.Bound["quorum"] != "2" {
		t.Fatalf("Ada's item = %+v, %v; want needs 2", it, ok)
	}
	if page := assenttest.ReadAll(f.Get("/inbox", ada.cookie)); !strings.Contains(page, "Needs 2 different people to answer yes; one no is enough to refuse") {
		t.Fatalf("the card does not give the rule:\n%s", page)
	}
	if code, out := answerAs(t, f, ada, it, "yes"); code != http.StatusOK || !strings.Contains(out.Message, "needs 1 more person") {
		t.Fatalf("Ada answers = %d %+v", code, out)
	}
	if o := waitFor(t, cs, id, 0); o["status"] != "pending" || !strings.Contains(o["next"].(string), "1 answered so far") {
		t.Fatalf("the agent after one answer: %v", o)
	}
	it, _ = question(t, f, ada.cookie, ada.csrf, id)
	if it.Needs != 1 || len(it.Decisions) != 1 || it.Decisions[0] != "decline" {
		t.Fatalf("Ada's item after her answer = %+v", it)
	}
	if code, out := answerAs(t, f, ada, it, "yes"); code != http.StatusConflict || out.Error == nil || out.Error.Code != "already_answered" {
		t.Fatalf("Ada again = %d %+v, want 409 already_answered", code, out)
	}
	page := assenttest.ReadAll(f.Get("/inbox", ben.cookie))
	if !strings.Contains(page, "Answered by Ada: yes · needs 1 more person") {
		t.Fatalf("Ben's card does not show Ada's answer:\n%s", page)
	}
	got := make(chan map[string]any, 1)
	go func() { got <- waitFor(t, cs, id, 30000) }()
	it, _ = question(t, f, ben.cookie, ben.csrf, id)
	if code, out := answerAs(t, f, ben, it, "yes"); code != http.StatusOK || out.Status != "approved" {
		t.Fatalf("Ben answers = %d %+v", code, out)
	}
	o := <-got
	if o["status"] != "answered" || o["answer"] != "yes" || o["decided_by"] != ben.p.ID || !strings.Contains(o["reason"].(string), `2 people answered "yes"`) {
		t.Fatalf("the agent hears %v", o)
	}
	recs, err := f.DB.Audit().ListAudit(t.Context(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.Action == "question.answer" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d answers audited, want 2", n)
	}
}

// Several people answering at once are each counted once, and the
// question ends once, when its quorum is met.
func TestQuestionQuorumConcurrentAnswers(t *testing.T) {
	f := assenttest.StartListening(t, nil)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	people := financePeople(t, f, "P1", "P2", "P3", "P4", "P5", "P6")
	id, _ := ask(t, cs, map[string]any{"question": "Ship it?", "group": "finance", "quorum": 6})
	items := make([]api.InboxItem, len(people))
	for i, p := range people {
		items[i], _ = question(t, f, p.cookie, p.csrf, id)
	}
	var wg sync.WaitGroup
	codes := make([]int, len(people))
	for i, p := range people {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = answerAs(t, f, p, items[i], "yes")
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("person %d: %d", i, c)
		}
	}
	got, err := f.DB.Asks().Ask(t.Context(), id)
	if err != nil || got.State != store.AskAnswered || got.Answer != "yes" || len(got.Answers) != 6 {
		t.Fatalf("after six people at once: %+v, %v", got, err)
	}
}
