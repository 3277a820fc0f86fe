package main

import "github.com/spf13/cobra"

func newControlsCmd(c *cli) *cobra.Command {
	return &cobra.Command{Use: "controls", Short: "controls commands", Hidden: true}
}
