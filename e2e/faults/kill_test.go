package faults

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// ledger counts the writes of a load: those acknowledged (2xx), those
// refused with an answer, and those that got no answer.
type ledger struct {
	mu       sync.Mutex
	acked    []string
	refused  map[string]int
	unknown  int
	statuses map[int]int
}

func newLedger() *ledger {
	return &ledger{refused: map[string]int{}, statuses: map[int]int{}}
}

func (l *ledger) note(id string, code int, body map[string]any, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.unknown++
	case code/100 == 2:
		l.acked = append(l.acked, id)
	default:
		l.refused[fmt.Sprintf("%d %s", code, errCode(body))]++
	}
	if err == nil {
		l.statuses[code]++
	}
}

// load writes Flow instances from writers goroutines until stop closes,
// writer w with tokens[w%len(tokens)].
func load(s *server, tokens []string, prefix string, writers int, stop <-chan struct{}, l *ledger) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range writers {
		token := tokens[w%len(tokens)]
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%s-w%d-%d", prefix, w, i)
				code, body, err := s.startInstance(token, id)
				l.note(id, code, body, err)
				if err != nil {
					return // the process is gone
				}
				if code == http.StatusTooManyRequests {
					// Over the per-principal rate: wait as told.
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	return &wg
}

// missing returns the acknowledged instances s does not have; owner maps
// each to the token that wrote it.
func missing(t *testing.T, s *server, owner map[string]string, ids []string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		token := owner[id]
		code, body, err := s.call("GET", "/v1/flows/instances/"+id, token, nil, nil)
		for code == http.StatusTooManyRequests && err == nil {
			time.Sleep(200 * time.Millisecond)
			code, body, err = s.call("GET", "/v1/flows/instances/"+id, token, nil, nil)
		}
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		if code != http.StatusOK {
			t.Logf("read %s: %d %s", id, code, errCode(body))
			out = append(out, id)
		}
	}
	return out
}

// TestKillUnderLoad kills `assent serve` on SQLite with SIGKILL while
// writers start Flow instances, starts it again on the same data
// directory, and checks that every write it acknowledged is there and
// that no write was answered 500. The short run has 2 rounds, the long
// one (-faults.long) 11.
func TestKillUnderLoad(t *testing.T) {
	exe := buildAssent(t)
	rounds, window, writers := 2, 400*time.Millisecond, 8
	if *long {
		rounds, window, writers = 11, 2*time.Second, 16
	}
	dir := t.TempDir()
	s := serve(t, exe, dir)
	if s.token == "" {
		t.Fatal("the first start printed no agent token")
	}
	tokens := append([]string{s.token}, agentTokens(t, exe, dir, "", 3)...)
	total := newLedger()
	for round := range rounds {
		l := newLedger()
		stop := make(chan struct{})
		prefix := fmt.Sprintf("k%02d", round)
		wg := load(s, tokens, prefix, writers, stop, l)
		time.Sleep(window)
		s.kill()
		close(stop)
		wg.Wait()
		owner := map[string]string{}
		for _, id := range l.acked {
			var w, i int
			fmt.Sscanf(id[len(prefix):], "-w%d-%d", &w, &i)
			owner[id] = tokens[w%len(tokens)]
		}
		s = serve(t, exe, dir)
		if lost := missing(t, s, owner, l.acked); len(lost) > 0 {
			t.Errorf("round %d: %d of %d acknowledged writes are missing after the kill, e.g. %v", round, len(lost), len(l.acked), lost[:min(3, len(lost))])
		}
		if l.statuses[http.StatusInternalServerError] > 0 {
			t.Errorf("round %d: %d writes were answered 500: %v", round, l.statuses[500], l.refused)
		}
		total.acked = append(total.acked, l.acked...)
		total.unknown += l.unknown
		for k, v := range l.refused {
			total.refused[k] += v
		}
	}
	t.Logf("%d kill -9 rounds: %d writes acknowledged, all present after restart; %d without an answer; refused: %v",
		rounds, len(total.acked), total.unknown, total.refused)
}
