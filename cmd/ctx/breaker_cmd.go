package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/contextos/ledger/wire"
	"github.com/spf13/cobra"
)

func init() { register(newBreakerCmd) }

func newBreakerCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "breaker [reset CAPABILITY]",
		Short: "Show the tenant's circuit breakers, or reset one",
		Long: `breaker with no argument lists the capabilities with a circuit breaker
([capabilities.breaker] threshold and window) and, for an open one, the figures
that tripped it. While open, the tenant's proposals of the capability are
refused circuit_breaker_open. "breaker reset CAPABILITY" closes it (recorded and
signed in the operator's name); do it once the provider is back.`,
		Args: cobra.MaximumNArgs(2),
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record (with reset)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		var req wire.BreakerRequest
		switch {
		case len(args) == 2 && args[0] == "reset":
			req = wire.BreakerRequest{CapabilityID: args[1], Reset: true, Reason: reason}
		case len(args) == 0:
			if reason != "" {
				return usageError("--reason goes with reset")
			}
		default:
			return usageError("breaker takes no argument or reset CAPABILITY")
		}
		var r wire.OpReply
		if err := c.op(wire.VerbBreaker, req, &r); err != nil {
			return err
		}
		failed := refused(wire.OpReply{OK: r.OK, Code: r.Code, Reason: r.Reason})
		if c.json {
			return errors.Join(printJSON(r), failed)
		}
		if r.OK {
			table("CAPABILITY\tSTATE\tTHRESHOLD\tWINDOW\tFAILURES\tFIRST\tLAST\tLAST REASON", func(w *tabwriter.Writer) {
				for _, b := range r.Breakers {
					state, failures, first, last, why := "closed", "-", "-", "-", "-"
					if b.Open && b.Trip != nil {
						state, failures, first, last, why = "open", fmt.Sprint(b.Trip.Failures), b.Trip.FirstFailure, b.Trip.LastFailure, b.Trip.LastReason
					}
					fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", b.CapabilityID, state, b.Threshold,
						time.Duration(b.WindowMillis)*time.Millisecond, failures, first, last, why)
				}
			})
		}
		return failed
	}
	return cmd
}
