package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/store"
)

// storeCommand makes cmd an offline command on the server's store: it
// adds --data, --store and --store-file, and its RunE calls check (when
// set) with the arguments, so that a usage error is told before any store
// is opened, then opens the store the server uses (creating a SQLite one
// when create is set), calls run with it and closes it.
func storeCommand(cmd *cobra.Command, create bool, check func(args []string) error, run func(ctx context.Context, db store.Store, args []string) error) *cobra.Command {
	var (
		data      string
		storeFlag storeFlags
	)
	addDataFlags(cmd.Flags(), &data, &storeFlag)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if check != nil {
			if err := check(args); err != nil {
				return err
			}
		}
		ctx := cmd.Context()
		db, err := openCommandStore(ctx, data, storeFlag, create)
		if err != nil {
			return err
		}
		defer db.Close()
		return run(ctx, db, args)
	}
	return cmd
}
