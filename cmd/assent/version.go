package main

import (
	"encoding/json"
	"fmt"

	"github.com/assent-run/assent"
	"github.com/spf13/cobra"
)

func newVersionCmd(c *cli) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the runtime version",
		Example: "  assent version\n  assent version --json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				return json.NewEncoder(c.out).Encode(map[string]string{"version": assent.Version})
			}
			_, err := fmt.Fprintf(c.out, "assent %s\n", assent.Version)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
