package oauth

import (
	"context"
	"time"
)

// What is pruned, and how often.
const (
	// pruneEvery is the least time between two prunings. Pruning runs
	// on the requests that leave something behind (registration and
	// consent), so a server nobody connects to does no work for it.
	pruneEvery = time.Minute
	// staleClient is how long a registered client that never got a
	// grant is kept.
	staleClient = 24 * time.Hour
)

// pruneSometimes revokes the agent principals of consents whose code
// expired unexchanged, and deletes registered clients that never got a
// grant, at most once per pruneEvery.
func (s *Server) pruneSometimes(ctx context.Context) {
	now := s.h.Now().UTC()
	s.pruneMu.Lock()
	if !s.lastPrune.IsZero() && now.Sub(s.lastPrune) < pruneEvery {
		s.pruneMu.Unlock()
		return
	}
	s.lastPrune = now
	s.pruneMu.Unlock()
	ctx = context.WithoutCancel(ctx)
	ids, err := s.st.PruneOAuth(ctx, now, now.Add(-staleClient))
	if err != nil {
		s.h.Log.Error("oauth prune failed", "err", err)
		return
	}
	for _, id := range ids {
		s.endAuthorization(ctx, id, "the person consented but the client never exchanged the code")
	}
}
