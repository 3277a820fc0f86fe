package main

import "github.com/spf13/cobra"

func newScreenCmd(c *cli) *cobra.Command {
	return &cobra.Command{Use: "screen", Short: "screen commands", Hidden: true}
}
