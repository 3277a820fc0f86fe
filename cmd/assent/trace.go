package main

import "github.com/spf13/cobra"

func newTraceCmd(c *cli) *cobra.Command {
	return &cobra.Command{Use: "trace", Short: "trace commands", Hidden: true}
}
