package store

import (
	"context"
	"fmt"
	"time"
)

// GroupNameMax is the longest group name.
const GroupNameMax = 64

// CheckGroupName reports whether name may name a group: 1 to GroupNameMax
// characters, lower-case letters, digits, '-', '_' and '.', starting with
// a letter or a digit. The error wraps ErrInvalid.
func CheckGroupName(name string) error {
	if name == "" || len(name) > GroupNameMax {
		return fmt.Errorf("%w: a group name has 1 to %d characters", ErrInvalid, GroupNameMax)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return fmt.Errorf("%w: group name %q may hold only lower-case letters, digits, '-', '_' and '.', and starts with a letter or digit", ErrInvalid, name)
		}
	}
	return nil
}

// GroupMember is one person's membership of one group.
type GroupMember struct {
	Group       string    `json:"group"`
	PrincipalID string    `json:"principal_id"`
	AddedAt     time.Time `json:"added_at"`
}

// Groups keeps which people belong to which named groups, so that a
// decision may be routed to a group rather than to an agent's
// supervisors. A group exists while it has a member.
type Groups interface {
	// AddGroupMember makes the principal m.PrincipalID a member of
	// m.Group. Adding a member again changes nothing; a name that fails
	// CheckGroupName gives ErrInvalid.
	AddGroupMember(ctx context.Context, m GroupMember) error
	// RemoveGroupMember ends the membership, or gives ErrNotFound.
	RemoveGroupMember(ctx context.Context, group, principalID string) error
	// GroupMembers returns the ids of group's members in the order they
	// were added; an unknown group has none.
	GroupMembers(ctx context.Context, group string) ([]string, error)
	// ListGroupMembers returns every membership, by group name, then in
	// the order they were added.
	ListGroupMembers(ctx context.Context) ([]GroupMember, error)
}
