package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"

	"github.com/spf13/cobra"

	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/store"
)

func newTraceCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Append to a Run's Trace",
		Long: `A Run's Trace is its bounded journal of observations (at most 2,048 events
and 4 MiB per generation; past that the newest events are kept with one
runtime.trace_compacted marker). Services append with "assent trace emit".`,
		Example: `  assent trace emit --kind checkpoint.ready --summary "Stage 1 done" --attention followup`,
	}
	cmd.AddCommand(newTraceEmitCmd(c))
	return cmd
}

func newTraceEmitCmd(c *cli) *cobra.Command {
	var o clientOpts
	var runID, kind, summary, data, level, attention string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "emit",
		Short: "Append one Trace event to a Run",
		Long: `Append one event to a Run's Trace. Inside a Run the Run and the token come
from ASSENT_RUN_ID and ASSENT_RUN_TOKEN. kind is a lowercase dotted token
(progress.update); level is info, warning or error; attention is notify,
followup or steer.`,
		Example: `  assent trace emit --kind progress.update --summary "3 of 10" --data '{"completed":3}'
  assent trace emit --run demo-player --kind note.added --summary "Checked by hand" --level warning --attention followup`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if runID == "" {
				return usageErr("no Run: pass --run or set ASSENT_RUN_ID")
			}
			if kind == "" {
				return usageErr("--kind is required")
			}
			ev := run.TraceInput{Kind: kind, Summary: summary, Level: level, Attention: attention}
			if data != "" {
				if !json.Valid([]byte(data)) {
					return usageErr("--data must be JSON")
				}
				ev.Data = json.RawMessage(data)
			}
			var v store.TraceEvent
			raw, err := callRuns(ctxOf(cmd), o, "POST", "/v1/runs/"+url.PathEscape(runIDArg(runID))+"/trace", ev, &v)
			if err != nil {
				return err
			}
			if asJSON {
				return printResult(c.out, true, raw)
			}
			fmt.Fprintf(c.out, "trace=%s kind=%s ts=%s\n", v.ID, v.Kind, store.FormatTime(v.TS))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&runID, "run", os.Getenv("ASSENT_RUN_ID"), "Run id (default $ASSENT_RUN_ID)")
	f.StringVar(&kind, "kind", "", "event kind, e.g. progress.update (required)")
	f.StringVar(&summary, "summary", "", "one-line summary (cut at 1,000 characters)")
	f.StringVar(&data, "data", "", "event data as JSON")
	f.StringVar(&level, "level", "", "info, warning or error")
	f.StringVar(&attention, "attention", "", "notify, followup or steer")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	addClientFlags(cmd, &o)
	return cmd
}
