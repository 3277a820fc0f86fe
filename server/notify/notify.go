// Package notify is the notifications part of the server: it tells the
// people a pending decision is routed to that it waits, by mail and by
// signed outgoing webhooks, and keeps doing so across restarts.
//
// Every pending item (an agent's command or tool proposal, a Flow's
// approval request, a value an agent staged on a control) becomes one
// outbox message per destination, written to the store with an id derived
// from the item and the destination. An agent's question is also
// recorded by the store, in the transaction that stores it, as waiting to
// be announced; the part writes its messages from that record and then
// clears it. For every item, the part
// writes them when it sees the item — on the event bus, and by scanning
// the pending items at start and every Options.Poll — so a message is
// never lost after the item is committed: a restart derives again what was
// missed, and a second write of the same message is a no-op. Delivery
// claims due messages with a lease, so among nodes sharing a store one
// delivers each message; a failed attempt is tried again on the schedule
// of package notify, then kept as a dead letter an owner can replay.
package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/notify"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/server/route"
	"github.com/assent-run/assent/store"
)

// Gate is what the part uses of the host's web checks.
type Gate interface {
	SameOrigin(r *http.Request) bool
	WebSession(r *http.Request) (store.Principal, store.Session, bool)
	AnonymousDelay(r *http.Request) time.Duration
	WebPage(h func(w http.ResponseWriter, r *http.Request, pg host.Page)) http.Handler
	SetNotice(w http.ResponseWriter, r *http.Request, msg string)
	TakeNotice(w http.ResponseWriter, r *http.Request) string
}

// Stores are the stores the part reads and writes.
type Stores struct {
	Notify     store.Notify
	Proposals  store.Proposals
	Flows      flow.Store
	Principals store.Principals
	Settings   store.Settings
	Sessions   store.Sessions
	// Asks, when set, has agents' questions announced too.
	Asks store.Asks
	// Deadlines, when set with Deps.RemindBefore, has decisions whose
	// deadline is near reminded of.
	Deadlines store.Deadlines
}

// ControlProposals lists the proposals staged on controls (the control
// registry).
type ControlProposals interface {
	Proposals(ctx context.Context, formID string) []control.Snapshot
}

// Deps is what New needs.
type Deps struct {
	Gate  Gate
	Store Stores
	// Controls is the control registry, whose staged proposals are
	// announced too.
	Controls ControlProposals
	Bus      *event.Bus
	Log      *slog.Logger
	Now      func() time.Time
	// Web receives the settings page.
	Web     *host.WebUI
	BaseURL string
	// Node names this node; a claimed message is leased to it.
	Node    string
	Options notify.Options
	// Router says who each item is routed to.
	Router route.Router
	// Client posts webhooks; nil uses a client with a 10 s timeout.
	Client *http.Client
	// RemindBefore are the points before a decision's deadline at which
	// the people it is routed to are reminded (each once); none when
	// empty.
	RemindBefore []time.Duration
}

func (d Deps) check() error {
	switch {
	case d.Gate == nil:
		return errors.New("notify: no gate")
	case d.Store.Notify == nil || d.Store.Proposals == nil || d.Store.Flows == nil || d.Store.Principals == nil ||
		d.Store.Settings == nil || d.Store.Sessions == nil:
		return errors.New("notify: a store is missing")
	case d.Router.Principals == nil || d.Router.Groups == nil || d.Router.Settings == nil:
		return errors.New("notify: no router")
	case d.Controls == nil:
		return errors.New("notify: no control registry")
	case d.Bus == nil:
		return errors.New("notify: no event bus")
	case d.Web == nil:
		return errors.New("notify: no web UI")
	case d.Log == nil || d.Now == nil:
		return errors.New("notify: no log or clock")
	case d.Node == "":
		return errors.New("notify: no node name")
	}
	return nil
}

// lease is how long a node holds a claimed message before another may
// take it; an attempt never takes longer (the webhook client's timeout and
// the mail dialer's deadline are shorter).
const lease = time.Minute

// Part is the notifications part.
type Part struct {
	Deps
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // a new item may be pending
	send   chan struct{} // a message may be due

	mu       sync.Mutex
	seen     map[string]bool // item keys already written to the outbox
	reminded map[string]bool // reminder keys already written to the outbox
}

// New builds the part and starts its two loops: one writes messages for
// pending items, one delivers due messages. Close stops them.
func New(ctx context.Context, d Deps) (*Part, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if d.Options.Poll <= 0 {
		d.Options.Poll = 250 * time.Millisecond
	}
	if err := d.Web.AddPages(templateFS, "templates/*.html"); err != nil {
		return nil, err
	}
	p := &Part{Deps: d, client: d.Client, wake: make(chan struct{}, 1), send: make(chan struct{}, 1), seen: map[string]bool{}, reminded: map[string]bool{}}
	if p.client == nil {
		p.client = &http.Client{Timeout: 10 * time.Second}
	}
	// This node was stopped: what it held when it stopped is due again.
	if err := d.Store.Notify.ReleaseMessages(ctx, d.Node); err != nil {
		return nil, fmt.Errorf("notify: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	sub := d.Bus.Subscribe(d.Bus.Seq(), 64, func(e event.Event) bool {
		return e.Type == notify.KindFlowApproval || e.Type == notify.KindRunProposal || e.Type == "control.command" || e.Type == "question.asked" || e.Type == event.Lagged
	})
	p.wg.Go(func() { p.listen(runCtx, sub) })
	p.wg.Go(func() { p.deriveLoop(runCtx) })
	p.wg.Go(func() { p.deliverLoop(runCtx) })
	return p, nil
}

// Name implements host.Part.
func (p *Part) Name() string { return "notify" }

// Routes implements host.Part: the decision links of mail and the
// notifications settings page.
func (p *Part) Routes(mux *host.Mux) {
	mux.HandleFunc("GET /notify/open/{link}", p.handleOpenPage)
	mux.HandleFunc("POST /notify/open", p.handleOpen)
	p.routesWeb(mux)
}

// Close stops the loops; messages claimed but not finished are delivered
// again, by this node after a restart or by another, when their lease ends.
func (p *Part) Close() {
	p.cancel()
	p.wg.Wait()
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (p *Part) listen(ctx context.Context, sub *event.Subscription) {
	defer sub.Close()
	for {
		if _, err := sub.Next(ctx); err != nil {
			return
		}
		poke(p.wake)
	}
}

// messageID is the stable id of the message about item to channel.
func messageID(item, channel string) string {
	sum := sha256.Sum256([]byte(item + "\x00" + channel))
	return "msg_" + hex.EncodeToString(sum[:12])
}

// deriveGap is the least time between the starts of two derivations: a
// burst of events (an agent staging values in a loop) is read once per gap
// rather than once per event, which took more of a server's CPU than the
// calls that caused them. A message waits at most this much longer.
const deriveGap = 50 * time.Millisecond

func (p *Part) deriveLoop(ctx context.Context) {
	t := time.NewTicker(p.Options.Poll)
	defer t.Stop()
	gap := min(deriveGap, p.Options.Poll)
	for {
		start := time.Now()
		if err := p.derive(ctx); err != nil && ctx.Err() == nil {
			p.Log.Warn("notify: reading pending items", "err", err)
		}
		if err := p.remind(ctx); err != nil && ctx.Err() == nil {
			p.Log.Warn("notify: reminding of deadlines", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-t.C:
		}
		if wait := gap - time.Since(start); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

func (p *Part) deliverLoop(ctx context.Context) {
	t := time.NewTicker(p.Options.Poll)
	defer t.Stop()
	for {
		for {
			n, err := p.deliverDue(ctx)
			if err != nil && ctx.Err() == nil {
				p.Log.Warn("notify: delivering", "err", err)
			}
			if n == 0 || err != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-p.send:
		case <-t.C:
		}
	}
}

// String describes a message for logs without its payload.
func describe(m store.OutboxMessage) string { return fmt.Sprintf("%s to %s", m.ID, m.Channel) }
