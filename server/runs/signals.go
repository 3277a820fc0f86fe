package runs

import (
	"context"
	"encoding/json"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/run"
)

// Several nodes share one store and one event log. A request about a Run
// that another node supervises is written to the store by the node that
// received it, which then publishes a run.signal event naming the Run and
// the supervising node; that node's follower hands the Signal to its
// supervisor, which reads what waits for it back from the store. The event
// carries names only and reaches, besides the nodes, the Run's owner and
// the people who oversee it.

// signalQueue bounds the Signals waiting to be followed; past it the
// subscription reports lagged, and the node sweeps the store for what it
// missed.
const signalQueue = 1024

// signalWorkers bounds how many Signals a node acts on at once.
const signalWorkers = 4

// publishSignal publishes s as a run.signal event for ownerID's Run.
func (s *Part) publishSignal(ownerID string, sig run.Signal) {
	data, err := json.Marshal(sig)
	if err != nil {
		return
	}
	s.Bus.Publish(s.OwnedEvent(run.SignalEventType, ownerID, data))
}

// followSignals starts acting on the Signals other nodes send this node,
// from the events after from. It returns at once; Close stops it.
//
// It keeps a subscription of its own rather than host.FollowOtherNodes,
// which follows from the moment it is called and hands over one event at
// a time: Signals are followed from a position taken before the manager
// started, so none sent while it re-adopted this node's Runs is missed,
// and up to signalWorkers of them are acted on at once, so one slow kill
// or log read does not hold up the others.
func (s *Part) followSignals(from int64) {
	node := s.Config.Node
	if node == "" || !s.SharedBus {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sub := s.Bus.Subscribe(from, signalQueue, func(e event.Event) bool {
		return e.Type == run.SignalEventType || e.Type == event.Lagged
	})
	done := make(chan struct{})
	s.stopSignals = func() {
		cancel()
		sub.Close()
		<-done
	}
	log := s.Log.With("part", "runs", "node", node)
	sem := make(chan struct{}, signalWorkers)
	go func() {
		defer close(done)
		defer func() {
			for range signalWorkers {
				sem <- struct{}{}
			}
		}()
		for {
			e, err := sub.Next(ctx)
			if err != nil {
				return
			}
			act := func(ctx context.Context) error { return s.runs.Sweep(ctx) }
			if e.Type != event.Lagged {
				var sig run.Signal
				if json.Unmarshal(e.Data, &sig) != nil || sig.Node != node {
					continue
				}
				act = func(ctx context.Context) error { return s.runs.HandleSignal(ctx, sig) }
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func() {
				defer func() { <-sem }()
				if err := act(ctx); err != nil && ctx.Err() == nil {
					log.Warn("a request from another node about a Run was not carried out", "err", err)
				}
			}()
		}
	}()
}
