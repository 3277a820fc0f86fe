package notify_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// BenchmarkNotifyLatency stages 100 command proposals (from four agents,
// each within its bound of pending proposals) on a server with the default
// poll interval, and reports the time from each proposal's staging (the
// API's answer) until both its mail reached the SMTP server and its signed
// webhook reached the receiver: p50, p99 and max over every proposal of
// every iteration.
func BenchmarkNotifyLatency(b *testing.B) {
	smtp, hooks := startSMTP(b), startHooks(b, 0)
	k, _ := setupPoll(b, smtp, hooks, 0)
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		staged := map[string]time.Time{}
		for a := range 4 {
			tok, _ := k.Issue(store.KindAgent, fmt.Sprintf("bench-%d-%d", i, a), "tool.invoke")
			for j := range 25 {
				id := propose(b, k, tok, fmt.Sprintf("echo pay %d.%02d EUR", j, a))
				staged[id] = time.Now()
			}
		}
		done := map[string]time.Time{}
		testwait.Eventually(b, 60*time.Second, func() bool {
			hooked, _, _ := hooks.Got()
			byItem := map[string]time.Time{}
			for _, h := range hooked {
				byItem[h.Body.Data.ItemID] = h.At
			}
			for _, m := range smtp.Mails() {
				for id := range staged {
					if _, ok := done[id]; ok || !strings.Contains(m.Data, id) {
						continue
					}
					if at, ok := byItem[id]; ok {
						done[id] = later(at, m.At)
					}
				}
			}
			return len(done) == len(staged)
		}, "every mail and webhook")
		for id, at := range done {
			lat = append(lat, at.Sub(staged[id]))
		}
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(float64(q(0.50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(q(0.99).Milliseconds()), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
