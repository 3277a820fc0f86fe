package main

import "github.com/spf13/cobra"

func newFlowCmd(c *cli) *cobra.Command {
	return &cobra.Command{Use: "flow", Short: "flow commands", Hidden: true}
}
