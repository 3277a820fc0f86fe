package record

import (
	"testing"
	"time"
)

func TestControlPending(t *testing.T) {
	tests := []struct {
		status string
		want   bool
	}{
		{ControlQueued, true}, {ControlDelivered, true}, {ControlClaimed, true},
		{ControlHandled, false}, {ControlFailed, false}, {"", false}, {"bogus", false},
	}
	for _, tt := range tests {
		if got := ControlPending(tt.status); got != tt.want {
			t.Errorf("ControlPending(%q) = %v, want %v", tt.status, got, tt.want)
		}
	}
}

// TestControlCanonicalLine: a Control encodes in its canonical form, with
// UTC millisecond times, fields in order and no HTML escaping.
func TestControlCanonicalLine(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.FixedZone("x", 3600))
	c := Control{ID: "c1", InstanceID: "i1", Action: "stop", Input: []byte(`{"why":"<now>"}`), Status: ControlQueued, QueuedAt: &at}
	line, err := EncodeLine(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"c1","run_instance_id":"i1","action":"stop","input":{"why":"<now>"},"status":"queued","queued_at":"2026-01-02T02:04:05.006Z"}` + "\n"
	if string(line) != want {
		t.Fatalf("EncodeLine = %s, want %s", line, want)
	}
	if got := c.StatusTime(); !got.Equal(at) {
		t.Fatalf("StatusTime = %v, want %v", got, at)
	}
}
