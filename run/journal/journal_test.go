package journal

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func TestValidActionMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(ActionPattern)
	tests := []struct {
		action string
		want   bool
	}{
		{"pause", true},
		{"player.pause", true},
		{"player-2.pause_now.x9", true},
		{"a.1", true},
		{"a._", true},
		{"a" + strings.Repeat("b", ActionMaxLength-1), true},
		{"a" + strings.Repeat("b", ActionMaxLength), false},
		{"", false},
		{"Pause", false},
		{"1pause", false},
		{"_pause", false},
		{".pause", false},
		{"player.", false},
		{"player..pause", false},
		{"player pause", false},
		{"player.Pause", false},
		{"player/pause", false},
		{"pause\n", false},
		{"é", false},
	}
	for _, tc := range tests {
		if got := ValidAction(tc.action); got != tc.want {
			t.Errorf("ValidAction(%q) = %v, want %v", tc.action, got, tc.want)
		}
		if got := len(tc.action) <= ActionMaxLength && re.MatchString(tc.action); got != tc.want {
			t.Errorf("ActionPattern on %q = %v, want %v", tc.action, got, tc.want)
		}
	}
}

// tally counts records as a backend's query does, each record's input
// apart from its other checks.
func tally(recs []Record, instance string) Tally {
	var t Tally
	for _, r := range recs {
		c := r.Control
		t.Bytes += r.Bytes
		pending := store.ControlPending(c.Status)
		if pending {
			t.Pending++
			if st := c.StatusTime(); !st.IsZero() && (t.Oldest.IsZero() || st.Before(t.Oldest)) {
				t.Oldest = st
			}
		}
		if !ValidInput(c.Input) {
			t.Malformed++
		}
		known := pending || c.Status == store.ControlHandled || c.Status == store.ControlFailed
		switch {
		case !known || c.ID == "" || c.InstanceID == "" || !ValidAction(c.Action) || len(c.Input) > InputMaxBytes:
			t.Invalid++
		case c.StatusTime().IsZero():
			t.Timestamp++
		case pending && c.InstanceID != instance:
			t.Generation++
		}
	}
	return t
}

func TestTallyStateAgreesWithSummarize(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Second)
	rec := func(status, instance, action, input string, at *time.Time) Record {
		c := store.Control{ID: "c", InstanceID: instance, Action: action, Status: status}
		if input != "" {
			c.Input = json.RawMessage(input)
		}
		switch status {
		case store.ControlQueued:
			c.QueuedAt = at
		case store.ControlDelivered:
			c.DeliveredAt = at
		case store.ControlClaimed:
			c.ClaimedAt = at
		case store.ControlHandled:
			c.HandledAt = at
		case store.ControlFailed:
			c.FailedAt = at
		}
		return Record{Control: c, Bytes: 100}
	}
	tests := []struct {
		name string
		recs []Record
		want string
	}{
		{"empty", nil, ""},
		{"sound", []Record{rec("handled", "old", "pause", `{}`, &t0), rec("queued", "g", "pause", "", &t1), rec("claimed", "g", "a.b", `1`, &t0)}, ""},
		{"malformed wins over invalid", []Record{rec("lost", "g", "pause", `{`, &t0)}, IntegrityMalformed},
		{"malformed wins over a later invalid", []Record{rec("lost", "g", "pause", "", &t0), rec("queued", "g", "pause", `[`, &t0)}, IntegrityMalformed},
		{"invalid", []Record{rec("queued", "g", "Pause", "", &t0)}, IntegrityInvalid},
		{"timestamp", []Record{rec("delivered", "g", "pause", "", nil)}, IntegrityTimestamp},
		{"invalid before timestamp", []Record{rec("queued", "g", "pause", "", nil), rec("queued", "", "pause", "", &t0)}, IntegrityInvalid},
		{"generation", []Record{rec("queued", "other", "pause", "", &t0)}, IntegrityGeneration},
		{"terminal of another generation", []Record{rec("failed", "other", "pause", "", &t0)}, ""},
		{"too large", []Record{{Control: rec("queued", "g", "pause", "", &t0).Control, Bytes: store.ControlJournalMaxBytes + 1}}, IntegrityBytes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := Summarize(tc.recs, "g")
			got := tally(tc.recs, "g").State()
			if want.Integrity != tc.want {
				t.Fatalf("Summarize integrity = %q, want %q", want.Integrity, tc.want)
			}
			if got.Integrity != want.Integrity || got.Bytes != want.Bytes || got.Pending != want.Pending || !got.Oldest.Equal(want.Oldest) {
				t.Errorf("Tally.State = %+v, Summarize = %+v", got, want)
			}
		})
	}
}
