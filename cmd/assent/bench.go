package main

import "github.com/spf13/cobra"

func newBenchCmd(c *cli) *cobra.Command {
	return &cobra.Command{Use: "bench", Short: "bench commands", Hidden: true}
}
