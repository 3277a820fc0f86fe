package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/store"
)

func newPersonCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "person",
		Short: "Manage people's groups, which decisions can be routed to (offline, on the server's store: --data or --store)",
		Example: `  assent person group add finance ada
  assent person group list
  assent person group remove finance ada`,
	}
	group := &cobra.Command{
		Use:   "group",
		Short: "Add people to groups, remove them, list the groups",
		Long: `A decision goes to the supervisors of the agent that filed it, unless the
program or request names a group: then it goes to that group's members.
Only the people it goes to, and the workspace's owner, see it in their
inbox and may decide it. A group exists while it has a member.`,
	}
	group.AddCommand(newPersonGroupAddCmd(c), newPersonGroupRemoveCmd(c), newPersonGroupListCmd(c))
	cmd.AddCommand(group)
	return cmd
}

func newPersonGroupAddCmd(c *cli) *cobra.Command {
	return storeCommand(&cobra.Command{
		Use:     "add GROUP PERSON...",
		Short:   "Make people (by name or id) members of a group",
		Example: "  assent person group add finance ada ben",
		Args:    usageArgs(cobra.MinimumNArgs(2)),
	}, false, func(args []string) error {
		if err := store.CheckGroupName(args[0]); err != nil {
			return usageErr("invalid_group: %v", errors.Unwrap(err))
		}
		return nil
	}, func(ctx context.Context, db store.Store, args []string) error {
		ids, err := personIDs(ctx, db.Principals(), args[1:])
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		for _, id := range ids {
			if err := db.Groups().AddGroupMember(ctx, store.GroupMember{Group: args[0], PrincipalID: id, AddedAt: now}); err != nil {
				return refused("%v", err)
			}
		}
		fmt.Fprintf(c.out, "Group %s: added %d. Decisions routed to %s from now on reach them.\n", args[0], len(ids), args[0])
		return nil
	})
}

func newPersonGroupRemoveCmd(c *cli) *cobra.Command {
	return storeCommand(&cobra.Command{
		Use:     "remove GROUP PERSON",
		Short:   "End a person's membership of a group",
		Example: "  assent person group remove finance ada",
		Args:    usageArgs(cobra.ExactArgs(2)),
	}, false, nil, func(ctx context.Context, db store.Store, args []string) error {
		ids, err := personIDs(ctx, db.Principals(), args[1:])
		if err != nil {
			return err
		}
		if err := db.Groups().RemoveGroupMember(ctx, args[0], ids[0]); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return refused("not_found: %s is not in group %q (assent person group list shows the groups)", args[1], args[0])
			}
			return refused("%v", err)
		}
		fmt.Fprintf(c.out, "Removed %s from group %s.\n", args[1], args[0])
		return nil
	})
}

func newPersonGroupListCmd(c *cli) *cobra.Command {
	var asJSON bool
	cmd := storeCommand(&cobra.Command{
		Use:     "list",
		Short:   "List every group and its members",
		Example: "  assent person group list\n  assent person group list --json",
		Args:    usageArgs(cobra.NoArgs),
	}, false, nil, func(ctx context.Context, db store.Store, args []string) error {
		ms, err := db.Groups().ListGroupMembers(ctx)
		if err != nil {
			return refused("%v", err)
		}
		ps, err := db.Principals().ListPrincipals(ctx)
		if err != nil {
			return refused("%v", err)
		}
		names := map[string]string{}
		for _, p := range ps {
			names[p.ID] = p.Name
		}
		type row struct {
			Group  string `json:"group"`
			ID     string `json:"id"`
			Name   string `json:"name"`
			Joined string `json:"added_at"`
		}
		rows := []row{}
		for _, m := range ms {
			rows = append(rows, row{m.Group, m.PrincipalID, names[m.PrincipalID], m.AddedAt.Format(time.RFC3339)})
		}
		if asJSON {
			return printJSON(c.out, rows)
		}
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tPERSON\tID\tADDED")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Group, r.Name, r.ID, r.Joined)
		}
		return tw.Flush()
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// personIDs resolves people named by name or id to their ids.
func personIDs(ctx context.Context, st store.Principals, names []string) ([]string, error) {
	all, err := st.ListPrincipals(ctx)
	if err != nil {
		return nil, refused("%v", err)
	}
	ids := make([]string, 0, len(names))
	for _, n := range names {
		p, ok, ambiguous := findPerson(all, n)
		if ambiguous {
			return nil, refused("ambiguous_name: more than one person is named %q; name them by id (assent token list shows ids)", n)
		}
		if !ok {
			return nil, refused("unknown_person: no active person is named %q; list people with `assent token list`", n)
		}
		ids = append(ids, p.ID)
	}
	return ids, nil
}
