package server

import (
	"context"
	"slices"

	"github.com/assent-run/assent/store"
)

// oversees reports whether p may see what the principal ownerID owns: p
// owns it, or p is a person who supervises ownerID. Unowned things
// (ownerID "") are everyone's.
func (s *Server) oversees(ctx context.Context, p store.Principal, ownerID string) bool {
	if ownerID == "" || p.ID == ownerID {
		return true
	}
	if p.Kind != store.KindHuman {
		return false
	}
	o, err := s.store.Principal(ctx, ownerID)
	return err == nil && slices.Contains(o.Supervisors, p.ID)
}
