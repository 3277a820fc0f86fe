package main

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/server"
)

// Bounds of a default decision deadline.
const (
	minDecisionDeadline = time.Second
	maxDecisionDeadline = 30 * 24 * time.Hour
)

// decisionKinds are the kinds --decision-deadline sets a default for,
// with what each names.
var decisionKinds = map[string]string{
	server.DeadlineCommand:  "an agent's command or tool proposal",
	server.DeadlineProposal: "a value an agent staged on a control",
	server.DeadlineQuestion: "an agent's question that names no deadline",
	server.DeadlineProgram:  "an agent's proposal to load a Flow program",
}

// kindList names the kinds --decision-deadline takes, sorted.
func kindList() string {
	ks := make([]string, 0, len(decisionKinds))
	for k := range decisionKinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// parseDecisionDeadlines reads --decision-deadline: KIND=DURATION pairs
// separated by commas, such as "command=1h,proposal=24h". A duration is
// Go's (90m, 1h30m) or a whole number of days (3d), between 1s and 30d.
// Empty means no default. A kind named twice, an unknown kind or a
// duration out of bounds is refused with bad_decision_deadline.
func parseDecisionDeadlines(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	bad := func(format string, args ...any) error {
		return refused("bad_decision_deadline: --decision-deadline: "+format+"; write KIND=DURATION pairs separated by commas, such as command=1h,proposal=24h,question=4h", args...)
	}
	for _, part := range strings.Split(s, ",") {
		kind, dur, ok := strings.Cut(strings.TrimSpace(part), "=")
		kind, dur = strings.TrimSpace(kind), strings.TrimSpace(dur)
		if !ok || kind == "" || dur == "" {
			return nil, bad("%q is not KIND=DURATION", part)
		}
		if _, known := decisionKinds[kind]; !known {
			return nil, bad("unknown kind %q (the kinds are %s)", kind, kindList())
		}
		if _, twice := out[kind]; twice {
			return nil, bad("kind %s is given twice", kind)
		}
		d, err := parseDays(dur)
		if err != nil {
			return nil, bad("%s: %q is not a duration such as 90m, 24h or 3d", kind, dur)
		}
		if d < minDecisionDeadline || d > maxDecisionDeadline {
			return nil, bad("%s: %s is not between 1s and 30d", kind, dur)
		}
		out[kind] = d
	}
	return out, nil
}

// parseDays reads a Go duration, or a whole number of days written Nd.
func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 10000 {
			return 0, fmt.Errorf("bad number of days %q", n)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// maxReminders bounds the points of --remind-before.
const maxReminders = 10

// parseRemindBefore reads --remind-before: durations before a decision's
// deadline at which its people are reminded, separated by commas, such as
// "1h,10m" (each 1s to 30d, at most 10, none twice). Empty means no
// reminders. Anything else is refused with bad_remind_before.
func parseRemindBefore(s string) ([]time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	bad := func(format string, args ...any) error {
		return refused("bad_remind_before: --remind-before: "+format+"; write durations before the deadline separated by commas, such as 1h,10m", args...)
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxReminders {
		return nil, bad("at most %d points, not %d", maxReminders, len(parts))
	}
	var out []time.Duration
	for _, part := range parts {
		part = strings.TrimSpace(part)
		d, err := parseDays(part)
		if err != nil {
			return nil, bad("%q is not a duration such as 10m, 1h or 1d", part)
		}
		if d < minDecisionDeadline || d > maxDecisionDeadline {
			return nil, bad("%s is not between 1s and 30d", part)
		}
		if slices.Contains(out, d) {
			return nil, bad("%s is given twice", part)
		}
		out = append(out, d)
	}
	return out, nil
}
