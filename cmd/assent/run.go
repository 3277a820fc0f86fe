package main

import "github.com/spf13/cobra"

func newRunCmd(c *cli) *cobra.Command {
	return &cobra.Command{Use: "run", Short: "run commands", Hidden: true}
}
