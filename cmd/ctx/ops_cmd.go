package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/contextos/ledger/gateway"
	"github.com/spf13/cobra"
)

func init() {
	register(newExposureCmd)
	register(newAttemptsCmd)
	register(newReconcileCmd)
	register(newCloseAttemptCmd)
	register(newAssertAbsenceCmd)
	register(newKillSwitchCmd)
	register(newAdmitRunCmd)
}

// refused turns a refused operator reply into exit code 1.
func refused(r gateway.OpReply) error {
	if r.OK {
		return nil
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("refused %s: %s", r.Code, r.Reason)}
}

func table(header string, rows func(w *tabwriter.Writer)) {
	w := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, header)
	rows(w)
	_ = w.Flush()
}

// exposureSubcommands are added under "ctx exposure" (ctx exposure export).
var exposureSubcommands []func() *cobra.Command

func newExposureCmd() *cobra.Command {
	var guarantee, resource string
	cmd := &cobra.Command{
		Use:   "exposure",
		Short: "Balances of every resource: limit, committed, held, available",
		Args:  cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&guarantee, "guarantee", "", "only this guarantee")
	cmd.Flags().StringVar(&resource, "resource", "", "only this resource")
	cmd.RunE = func(*cobra.Command, []string) error {
		var r gateway.OpReply
		if err := c.op("exposure", gateway.OpRequest{GuaranteeID: guarantee, Resource: resource}, &r); err != nil {
			return err
		}
		if c.json {
			return errors.Join(printJSON(r.Exposure), refused(r))
		}
		table("GUARANTEE\tRESOURCE\tLIMIT\tCOMMITTED\tHELD\tAVAILABLE\tOPEN", func(w *tabwriter.Writer) {
			for _, e := range r.Exposure {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", e.GuaranteeID, e.Resource, e.Limit, e.Committed, e.Held, e.Available, e.OpenAttempts)
			}
		})
		return refused(r)
	}
	for _, f := range exposureSubcommands {
		cmd.AddCommand(f())
	}
	return cmd
}

func newAttemptsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attempts",
		Short: "Open attempts (holds) with the next safe step for each",
		Args:  cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		var r gateway.OpReply
		if err := c.op("attempts", gateway.OpRequest{}, &r); err != nil {
			return err
		}
		if c.json {
			return errors.Join(printJSON(r.Attempts), refused(r))
		}
		table("ATTEMPT\tPRINCIPAL\tGUARANTEE\tRESOURCE\tAMOUNT\tSTATE\tLAST\tNEXT SAFE STEP\tLAST REASON", func(w *tabwriter.Writer) {
			for _, a := range r.Attempts {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.AttemptID, a.Principal, a.GuaranteeID, a.Resource, a.Amount, a.State, orDash(string(a.Last)), a.NextStep, orDash(a.LastReason))
			}
		})
		return refused(r)
	}
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printSettled(c *connFlags, r gateway.OpReply) error {
	if c.json {
		return errors.Join(printJSON(r), refused(r))
	}
	if !r.OK {
		return refused(r)
	}
	table("ATTEMPT\tOUTCOME\tSTATUS\tCODE\tNOTE", func(w *tabwriter.Writer) {
		for _, s := range r.Settled {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.AttemptID, orDash(string(s.Outcome)), orDash(string(s.Status)), orDash(string(s.Code)), s.Reason)
		}
	})
	for _, s := range r.Settled {
		if s.Code != "" {
			return &ExitError{Code: 1, Err: fmt.Errorf("attempt %s: %s", s.AttemptID, s.Code)}
		}
	}
	return nil
}

func newReconcileCmd() *cobra.Command {
	var attempt string
	var all bool
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Ask the provider about an attempt by its idempotency key and record the answer",
		Long: `reconcile queries the provider through the capability's recovery contract and
records what it reports: applied commits the hold, not_applied releases it,
pending or unknown keeps it.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&attempt, "attempt", "", "the attempt id")
	cmd.Flags().BoolVar(&all, "all", false, "every unresolved attempt of the tenant")
	cmd.RunE = func(*cobra.Command, []string) error {
		if (attempt == "") == !all {
			return usageError("name exactly one of --attempt or --all")
		}
		var r gateway.OpReply
		if err := c.op("reconcile", gateway.OpRequest{AttemptID: attempt, All: all}, &r); err != nil {
			return err
		}
		return printSettled(c, r)
	}
	return cmd
}

func newCloseAttemptCmd() *cobra.Command {
	var attempt, guarantee, resource, reason string
	cmd := &cobra.Command{
		Use:   "close-attempt",
		Short: "Close an attempt whose dispatch never started (or tombstone an unknown one)",
		Long: `close-attempt releases the hold of an attempt that never started dispatch. It is
refused with shared_guarantee_dispatch_active once dispatch started: then only
evidence of absence can release the hold. An attempt no operation knows is
tombstoned on the named guarantee and resource, so a late reservation for it
is refused.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&attempt, "attempt", "", "the attempt id (required)")
	cmd.Flags().StringVar(&guarantee, "guarantee", "", "guarantee of an unknown attempt to tombstone")
	cmd.Flags().StringVar(&resource, "resource", "", "resource of an unknown attempt to tombstone")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.RunE = func(*cobra.Command, []string) error {
		if attempt == "" {
			return usageError("--attempt is required")
		}
		var r gateway.OpReply
		if err := c.op("close-attempt", gateway.OpRequest{AttemptID: attempt, GuaranteeID: guarantee, Resource: resource, Reason: reason}, &r); err != nil {
			return err
		}
		return printSettled(c, r)
	}
	return cmd
}

func newAssertAbsenceCmd() *cobra.Command {
	var attempt, artifact string
	cmd := &cobra.Command{
		Use:   "assert-absence",
		Short: "Release a held attempt on your signed assertion that the effect does not exist",
		Long: `assert-absence records, signed and in your name, that the effect of an attempt
does not exist, citing an artifact (a provider export, a ticket). It is
accepted only where an observation already exists (pending, unknown or
partial); with no observation at all the hold stays: reconcile first.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&attempt, "attempt", "", "the attempt id (required)")
	cmd.Flags().StringVar(&artifact, "artifact", "", "reference of the evidence of absence (required)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if attempt == "" || artifact == "" {
			return usageError("--attempt and --artifact are required")
		}
		var r gateway.OpReply
		if err := c.op("assert-absence", gateway.OpRequest{AttemptID: attempt, ArtifactRef: artifact}, &r); err != nil {
			return err
		}
		return printSettled(c, r)
	}
	return cmd
}

func newKillSwitchCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "kill-switch [on|off]",
		Short: "Show, engage or release the tenant's kill switch",
		Long: `kill-switch with no argument shows the state. While engaged every new proposal
of the tenant is refused kill_switch_engaged; settlement and reconciliation
of existing attempts go on.`,
		Args: cobra.MaximumNArgs(1),
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		req := gateway.OpRequest{Reason: reason}
		if len(args) == 1 {
			var v bool
			switch args[0] {
			case "on":
				v = true
			case "off":
			default:
				return usageError("kill-switch takes on or off, not %q", args[0])
			}
			req.Engaged = &v
		}
		var r gateway.OpReply
		if err := c.op("kill-switch", req, &r); err != nil {
			return err
		}
		if c.json {
			return errors.Join(printJSON(r), refused(r))
		}
		if r.OK && r.KillSwitch != nil {
			state := "released"
			if *r.KillSwitch {
				state = "engaged"
			}
			fmt.Printf("kill switch of %s: %s\n", c.tenant, state)
		}
		return refused(r)
	}
	return cmd
}

func newAdmitRunCmd() *cobra.Command {
	var runID, parent, principal string
	var calls, amount int64
	cmd := &cobra.Command{
		Use:   "admit-run --run RUN --principal AGENT --calls N --amount A",
		Short: "Admit an agent's run with a budget of calls and amount",
		Long: `admit-run gives a run its budget: how many effectful calls and how much amount
(in the guarantee's minor unit) its proposals may consume. A tenant's runs
that no operator admitted are refused run_budget_exhausted unless the tenant
says unadmitted_runs = "unlimited". A budget is set once (a second admission
is refused run_already_admitted); with --parent, the budget is carved out of
the parent run's, which it may not exceed.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&runID, "run", "", "the run id (required)")
	cmd.Flags().StringVar(&principal, "principal", "", "the agent whose run it is (required)")
	cmd.Flags().Int64Var(&calls, "calls", 0, "effectful calls the run may make")
	cmd.Flags().Int64Var(&amount, "amount", 0, "amount the run may consume, in minor units")
	cmd.Flags().StringVar(&parent, "parent", "", "a parent run whose budget this one is carved from")
	cmd.RunE = func(*cobra.Command, []string) error {
		if runID == "" || principal == "" {
			return usageError("--run and --principal are required")
		}
		var r gateway.OpReply
		if err := c.op("admit-run", gateway.AdmitRunRequest{RunID: runID, ParentRunID: parent, Principal: principal, Calls: calls, Amount: amount}, &r); err != nil {
			return err
		}
		if c.json {
			return errors.Join(printJSON(r), refused(r))
		}
		if err := refused(r); err != nil {
			return err
		}
		fmt.Printf("admitted run %s of %s: %d calls, amount %d\n", runID, principal, calls, amount)
		return nil
	}
	return cmd
}
