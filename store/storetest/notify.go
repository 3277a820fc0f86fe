package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func outboxMsg(id string, due time.Time) store.OutboxMessage {
	return store.OutboxMessage{ID: id, Channel: "webhook:w1", Item: "run.proposal:" + id,
		Payload: []byte(`{"n":"` + id + `"}`), CreatedAt: due, NextAt: due}
}

func testNotify(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("enqueue is idempotent", func(t *testing.T) {
		n := open(t).Notify()
		got, err := n.EnqueueMessages(ctx(t), []store.OutboxMessage{outboxMsg("m1", epoch), outboxMsg("m2", epoch)})
		if err != nil || got != 2 {
			t.Fatalf("EnqueueMessages = %d, %v; want 2", got, err)
		}
		again := outboxMsg("m1", at(time.Hour))
		again.Payload = []byte(`{"changed":true}`)
		if got, err := n.EnqueueMessages(ctx(t), []store.OutboxMessage{again}); err != nil || got != 0 {
			t.Fatalf("enqueue again = %d, %v; want 0", got, err)
		}
		ms, err := n.ListMessages(ctx(t), store.MessagePending, 0)
		if err != nil || len(ms) != 2 {
			t.Fatalf("ListMessages = %v, %v", ms, err)
		}
		for _, m := range ms {
			if m.ID == "m1" && (string(m.Payload) != `{"n":"m1"}` || !m.NextAt.Equal(epoch)) {
				t.Errorf("m1 changed by a second enqueue: %+v", m)
			}
		}
		bad := outboxMsg("m3", epoch)
		bad.Payload = []byte("not json")
		if _, err := n.EnqueueMessages(ctx(t), []store.OutboxMessage{bad}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("bad payload err = %v", err)
		}
	})

	t.Run("claim, retry, deliver", func(t *testing.T) {
		n := open(t).Notify()
		if _, err := n.EnqueueMessages(ctx(t), []store.OutboxMessage{outboxMsg("m1", epoch), outboxMsg("later", at(time.Hour))}); err != nil {
			t.Fatal(err)
		}
		ms, err := n.ClaimMessages(ctx(t), "a", epoch, time.Minute, 10)
		if err != nil || len(ms) != 1 || ms[0].ID != "m1" || ms[0].Attempts != 1 {
			t.Fatalf("claim = %+v, %v; want m1 at attempt 1", ms, err)
		}
		// Leased: another node gets nothing until the lease ends.
		if ms, err := n.ClaimMessages(ctx(t), "b", at(time.Second), time.Minute, 10); err != nil || len(ms) != 0 {
			t.Fatalf("claim while leased = %+v, %v", ms, err)
		}
		if err := n.FinishAttempt(ctx(t), store.Attempt{ID: "m1", Node: "b", Delivered: true, At: epoch}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("finish by another node = %v, want ErrConflict", err)
		}
		if err := n.FinishAttempt(ctx(t), store.Attempt{ID: "nope", Node: "a", Delivered: true, At: epoch}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("finish unknown = %v, want ErrNotFound", err)
		}
		if err := n.FinishAttempt(ctx(t), store.Attempt{ID: "m1", Node: "a", Error: "500", Retry: at(2 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		if ms, _ := n.ClaimMessages(ctx(t), "a", at(time.Second), time.Minute, 10); len(ms) != 0 {
			t.Fatalf("claimed before its retry: %+v", ms)
		}
		ms, err = n.ClaimMessages(ctx(t), "b", at(2*time.Second), time.Minute, 10)
		if err != nil || len(ms) != 1 || ms[0].Attempts != 2 || ms[0].LastError != "500" {
			t.Fatalf("second claim = %+v, %v", ms, err)
		}
		if err := n.FinishAttempt(ctx(t), store.Attempt{ID: "m1", Node: "b", Delivered: true, At: at(3 * time.Second)}); err != nil {
			t.Fatal(err)
		}
		done, err := n.ListMessages(ctx(t), store.MessageDelivered, 0)
		if err != nil || len(done) != 1 || !done[0].DeliveredAt.Equal(at(3*time.Second)) {
			t.Fatalf("delivered = %+v, %v", done, err)
		}
	})

	t.Run("expired lease is claimed again", func(t *testing.T) {
		n := open(t).Notify()
		if _, err := n.EnqueueMessages(ctx(t), []store.OutboxMessage{outboxMsg("m1", epoch)}); err != nil {
			t.Fatal(err)
		}
		if ms, _ := n.ClaimMessages(ctx(t), "dead-node", epoch, time.Minute, 1); len(ms) != 1 {
			t.Fatal("first claim took nothing")
		}
		ms, err := n.ClaimMessages(ctx(t), "b", at(time.Minute), time.Minute, 1)
		if err != nil || len(ms) != 1 || ms[0].Attempts != 2 {
			t.Fatalf("claim after lease = %+v, %v", ms, err)
		}
		// A node that restarts releases what it held.
		if err := n.ReleaseMessages(ctx(t), "b"); err != nil {
			t.Fatal(err)
		}
		ms, err = n.ClaimMessages(ctx(t), "b", at(time.Minute+time.Second), time.Minute, 1)
		if err != nil || len(ms) != 1 || ms[0].Attempts != 3 {
			t.Fatalf("claim after release = %+v, %v", ms, err)
		}
	})

	t.Run("dead letter and replay", func(t *testing.T) {
		n := open(t).Notify()
		if _, err := n.EnqueueMessages(ctx(t), []store.OutboxMessage{outboxMsg("m1", epoch)}); err != nil {
			t.Fatal(err)
		}
		if err := n.ReplayMessage(ctx(t), "m1", epoch); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("replay of a pending message = %v", err)
		}
		n.ClaimMessages(ctx(t), "a", epoch, time.Minute, 1)
		if err := n.FinishAttempt(ctx(t), store.Attempt{ID: "m1", Node: "a", Error: "gone"}); err != nil {
			t.Fatal(err)
		}
		dead, err := n.ListMessages(ctx(t), store.MessageDead, 0)
		if err != nil || len(dead) != 1 || dead[0].LastError != "gone" {
			t.Fatalf("dead = %+v, %v", dead, err)
		}
		if ms, _ := n.ClaimMessages(ctx(t), "a", at(time.Hour), time.Minute, 1); len(ms) != 0 {
			t.Fatal("a dead message was claimed")
		}
		if err := n.ReplayMessage(ctx(t), "m1", at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		ms, err := n.ClaimMessages(ctx(t), "a", at(time.Hour), time.Minute, 1)
		if err != nil || len(ms) != 1 || ms[0].Attempts != 1 {
			t.Fatalf("claim after replay = %+v, %v", ms, err)
		}
	})

	t.Run("concurrent claims take each message once", func(t *testing.T) {
		n := open(t).Notify()
		var ms []store.OutboxMessage
		for i := range 60 {
			ms = append(ms, outboxMsg(fmt.Sprintf("m%02d", i), epoch))
		}
		if _, err := n.EnqueueMessages(ctx(t), ms); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				node := fmt.Sprintf("node%d", w)
				for {
					got, err := n.ClaimMessages(ctx(t), node, at(time.Second), time.Hour, 5)
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, m := range got {
						seen[m.ID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != 60 {
			t.Errorf("claimed %d distinct messages, want 60", len(seen))
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("%s claimed %d times", id, k)
			}
		}
	})

	t.Run("webhooks", func(t *testing.T) {
		n := open(t).Notify()
		w := store.Webhook{ID: "wh_1", URL: "https://hooks.example/a", Secret: "whsec_x", CreatedAt: epoch}
		if err := n.AddWebhook(ctx(t), w); err != nil {
			t.Fatal(err)
		}
		if err := n.AddWebhook(ctx(t), w); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second add = %v", err)
		}
		ws, err := n.Webhooks(ctx(t))
		if err != nil || len(ws) != 1 || ws[0] != w {
			t.Fatalf("Webhooks = %+v, %v", ws, err)
		}
		if err := n.RemoveWebhook(ctx(t), "wh_1"); err != nil {
			t.Fatal(err)
		}
		if err := n.RemoveWebhook(ctx(t), "wh_1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second remove = %v", err)
		}
	})
}
