package notify_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// Two nodes sharing PostgreSQL both see every pending item and both try
// to deliver; each message reaches the receiver once.
func TestTwoNodesDeliverOnce(t *testing.T) {
	if os.Getenv("ASSENT_TEST_POSTGRES") == "" {
		t.Skip("needs PostgreSQL: set ASSENT_TEST_POSTGRES")
	}
	hooks := startHooks(t, 0)
	opts := notify.Options{Poll: 20 * time.Millisecond}
	mod := func(c *server.Config) {
		c.Notify = opts
		c.Node = "node-a"
	}
	k := assenttest.StartOn(t, assenttest.Postgres, mod)
	ctx := context.Background()
	if err := k.DB.Notify().AddWebhook(ctx, store.Webhook{ID: "wh_test", URL: hooks.URL, Secret: hooks.Secret, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st := k.OpenStore(ctx)
	t.Cleanup(func() { st.Close() })
	b, err := server.New(ctx, server.Config{DataDir: t.TempDir(), Store: st, Node: "node-b",
		Notify: opts})
	if err != nil {
		t.Fatal(err)
	}
	hb := httptest.NewServer(b.Handler())
	t.Cleanup(func() { hb.Close(); b.Close() })

	const n = 20
	staged := map[string]bool{}
	for i := range n {
		staged[propose(t, k, k.Token, fmt.Sprintf("echo node %d", i))] = true
	}
	testwait.Eventually(t, 30*time.Second, func() bool {
		ms, err := k.DB.Notify().ListMessages(ctx, store.MessageDelivered, 0)
		return err == nil && len(ms) == n
	}, "every message delivered")
	got, requests, bad := hooks.Got()
	if len(bad) > 0 || len(got) != n || requests != n {
		t.Errorf("receiver: %d distinct, %d requests, bad %v; want %d and %d", len(got), requests, bad, n, n)
	}
	ms, _ := k.DB.Notify().ListMessages(ctx, "", 0)
	for _, m := range ms {
		if m.Attempts != 1 {
			t.Errorf("%s: %d attempts", m.ID, m.Attempts)
		}
	}
}
