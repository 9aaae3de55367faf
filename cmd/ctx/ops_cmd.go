package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/wire"
	"github.com/spf13/cobra"
)

func init() {
	register(newExposureCmd)
	register(newAttemptsCmd)
	register(newReconcileCmd)
	register(newCloseAttemptCmd)
	register(newAssertAbsenceCmd)
	register(newKillSwitchCmd)
	register(newConfirmCmd)
	register(newAdmitRunCmd)
}

func table(header string, rows func(w *tabwriter.Writer)) {
	w := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, header)
	rows(w)
	_ = w.Flush()
}

// do connects, runs f and, in JSON output, prints a refusal as JSON too
// (the exit code is 1 either way).
func (c *connFlags) do(f func(ctx context.Context, cl *client.Client) error) error {
	err := c.call(f)
	var r client.Refused
	if c.json && errors.As(err, &r) {
		_ = printJSON(map[string]any{"ok": false, "code": r.Code, "reason": wireNames.Replace(r.Reason)})
	}
	return err
}

// exposureSubcommands are added under "ctx exposure" (ctx exposure export).
var exposureSubcommands []func() *cobra.Command

func newExposureCmd() *cobra.Command {
	var guarantee, resource, digest string
	cmd := &cobra.Command{
		Use:   "exposure",
		Short: "Balances of every resource: limit, committed, held, available",
		Long: `exposure lists the balances of the tenant's resources, a page at a time. A
resource id longer than 256 bytes is shown shortened, with its SHA-256:
--resource-digest selects it by that digest.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	pf := addPageFlags(cmd)
	cmd.Flags().StringVar(&guarantee, "guarantee", "", "only this guarantee")
	cmd.Flags().StringVar(&resource, "resource", "", "only this resource")
	cmd.Flags().StringVar(&digest, "resource-digest", "", "only the resource with this SHA-256 (as shown beside a shortened id)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := pf.check(); err != nil {
			return err
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			rows, err := collect(ctx, pf, func(ctx context.Context, p client.Page) ([]client.ExposureRow, string, error) {
				return cl.ExposurePage(ctx, client.OpRequest{GuaranteeID: guarantee, Resource: resource, ResourceDigest: digest, Limit: p.Limit, Cursor: p.Cursor})
			})
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(nonNil(rows))
			}
			head := "GUARANTEE\tRESOURCE\tLIMIT\tCOMMITTED\tHELD\tAVAILABLE\tOPEN"
			if c.wide() {
				head = "TENANT\t" + head + "\tWINDOW\tCAPACITY RETURNS\tARCHIVED (COMMITTED/RELEASED)\tOVER LIMIT"
			}
			table(head, func(w *tabwriter.Writer) {
				for _, e := range rows {
					if !c.wide() {
						fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", e.GuaranteeID, withDigest(e.Resource, e.ResourceDigest), e.Limit, e.Committed, e.Held, e.Available, e.OpenAttempts)
						continue
					}
					returns := "-"
					if !e.ReturnsAt.IsZero() {
						returns = fmt.Sprintf("%d at %s", e.Returns, e.ReturnsAt.Format(time.RFC3339))
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d/%d\t%d\n", e.Tenant, e.GuaranteeID, withDigest(e.Resource, e.ResourceDigest), e.Limit, e.Committed, e.Held,
						e.Available, e.OpenAttempts, orDash(e.Window), returns, e.Archived.Committed, e.Archived.Released, e.OverLimit)
				}
			})
			return nil
		})
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
		Long: `attempts lists the open attempts, a page at a time, in attempt id order. A
resource id, run id or reason longer than 256 bytes is shown shortened, with
its SHA-256.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	pf := addPageFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := pf.check(); err != nil {
			return err
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			rows, err := collect(ctx, pf, cl.AttemptsPage)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(nonNil(rows))
			}
			head := "ATTEMPT\tPRINCIPAL\tGUARANTEE\tRESOURCE\tAMOUNT\tSTATE\tLAST\tNEXT SAFE STEP\tLAST REASON"
			if c.wide() {
				head = "ATTEMPT\tOPERATION\tRUN\tPRINCIPAL\tGUARANTEE\tRESOURCE\tAMOUNT\tSTATE\tLAST\tNEXT SAFE STEP\tLAST REASON"
			}
			table(head, func(w *tabwriter.Writer) {
				for _, a := range rows {
					if c.wide() {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.AttemptID, a.OperationID, withDigest(a.RunID, a.RunIDDigest), a.Principal, a.GuaranteeID,
							withDigest(a.Resource, a.ResourceDigest), a.Amount, a.State, orDash(string(a.Last)), a.NextStep, orDash(withDigest(a.LastReason, a.LastReasonDigest)))
						continue
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.AttemptID, a.Principal, a.GuaranteeID, withDigest(a.Resource, a.ResourceDigest), a.Amount, a.State, orDash(string(a.Last)), a.NextStep, orDash(a.LastReason))
				}
			})
			return nil
		})
	}
	return cmd
}

// nonNil makes an empty list print as [] rather than null.
func nonNil[T any](rows []T) []T {
	if rows == nil {
		return []T{}
	}
	return rows
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printSettled prints what an action did to each attempt; an attempt it
// could not settle is exit 1.
func printSettled(c *connFlags, rows []client.SettleRow) error {
	var failed error
	for _, s := range rows {
		if s.Code != "" && failed == nil {
			failed = &ExitError{Code: exitRefused, Err: fmt.Errorf("attempt %s: %s: %s", s.AttemptID, s.Code, wireNames.Replace(s.Reason))}
		}
	}
	if c.json {
		return errors.Join(printJSON(nonNil(rows)), failed)
	}
	table("ATTEMPT\tOUTCOME\tSTATUS\tCODE\tNOTE", func(w *tabwriter.Writer) {
		for _, s := range rows {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.AttemptID, orDash(string(s.Outcome)), orDash(string(s.Status)), orDash(string(s.Code)), withDigest(s.Reason, s.ReasonDigest))
		}
	})
	return failed
}

func newReconcileCmd() *cobra.Command {
	var attempt string
	var all bool
	cmd := &cobra.Command{
		Use:   "reconcile (--attempt ID | --all)",
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
		return c.do(func(ctx context.Context, cl *client.Client) error {
			rows, err := cl.Reconcile(ctx, attempt)
			if err != nil {
				return err
			}
			return printSettled(c, rows)
		})
	}
	return cmd
}

func newCloseAttemptCmd() *cobra.Command {
	var attempt, guarantee, resource, digest, reason string
	cmd := &cobra.Command{
		Use:   "close-attempt --attempt ID",
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
	cmd.Flags().StringVar(&digest, "resource-digest", "", "instead of --resource: its SHA-256, as shown beside a shortened id")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.RunE = func(*cobra.Command, []string) error {
		if attempt == "" {
			return usageError("--attempt is required")
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			var r wire.OpReply
			err := cl.Op(ctx, "close-attempt", client.OpRequest{AttemptID: attempt, GuaranteeID: guarantee, Resource: resource, ResourceDigest: digest, Reason: reason}, &r)
			if err != nil {
				return err
			}
			if len(r.Exposure) > 0 {
				if c.json {
					return printJSON(r.Exposure)
				}
				e := r.Exposure[0]
				fmt.Fprintf(stdout, "tombstoned attempt %s on %s/%s (committed %d, held %d, available %d)\n", attempt, e.GuaranteeID, withDigest(e.Resource, e.ResourceDigest), e.Committed, e.Held, e.Available)
				return nil
			}
			return printSettled(c, r.Settled)
		})
	}
	return cmd
}

func newAssertAbsenceCmd() *cobra.Command {
	var attempt, artifact string
	cmd := &cobra.Command{
		Use:   "assert-absence --attempt ID --artifact REF",
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
		return c.do(func(ctx context.Context, cl *client.Client) error {
			rows, err := cl.AssertAbsence(ctx, attempt, artifact)
			if err != nil {
				return err
			}
			return printSettled(c, rows)
		})
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
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{"on", "off"},
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		var engage *bool
		if len(args) == 1 {
			var v bool
			switch args[0] {
			case "on":
				v = true
			case "off":
			default:
				return usageError("kill-switch takes on or off, not %q", args[0])
			}
			engage = &v
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			v, err := cl.KillSwitch(ctx, engage, reason)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(map[string]any{"tenant": cl.Tenant(), "kill_switch": v})
			}
			state := "released"
			if v {
				state = "engaged"
			}
			fmt.Fprintf(stdout, "kill switch of %s: %s\n", cl.Tenant(), state)
			return nil
		})
	}
	return cmd
}

func newAdmitRunCmd() *cobra.Command {
	var runID, parent, principal, pack string
	var calls, amount int64
	cmd := &cobra.Command{
		Use:   "admit-run --run RUN --principal AGENT --calls N --amount A",
		Short: "Admit an agent's run with a budget of calls and amount",
		Long: `admit-run gives a run its budget: how many effectful calls and how much amount
(in the guarantee's minor unit) its proposals may consume. A tenant's runs
that no operator admitted are refused run_budget_exhausted unless the tenant
says unadmitted_runs = "unlimited". A budget is set once (a second admission
is refused run_already_admitted); with --parent, the budget is carved out of
the parent run's, which it may not exceed. The run pins a context pack
version: --pack (id@version or digest), or else the promoted one; every
decision of the run records it.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&runID, "run", "", "the run id (required)")
	cmd.Flags().StringVar(&principal, "principal", "", "the agent whose run it is (required)")
	cmd.Flags().Int64Var(&calls, "calls", 0, "effectful calls the run may make")
	cmd.Flags().Int64Var(&amount, "amount", 0, "amount the run may consume, in minor units")
	cmd.Flags().StringVar(&parent, "parent", "", "a parent run whose budget this one is carved from")
	cmd.Flags().StringVar(&pack, "pack", "", "the context pack version the run pins (id@version or digest; default: the promoted one)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if runID == "" || principal == "" {
			return usageError("--run and --principal are required")
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			run, err := cl.AdmitRun(ctx, client.AdmitRunRequest{RunID: runID, ParentRunID: parent, Principal: principal, Calls: calls, Amount: amount, Pack: pack})
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(run)
			}
			fmt.Fprintf(stdout, "admitted run %s of %s: %d calls, amount %d\n", run.RunID, run.Principal, run.Calls, run.Amount)
			if run.Pack != nil {
				fmt.Fprintf(stdout, "pinned context pack %s %s\n", run.Pack, run.Pack.Digest)
			}
			return nil
		})
	}
	return cmd
}

func newConfirmCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "confirm REQUEST_ID",
		Short: "Confirm another operator's request that the two-person rule holds",
		Long: `confirm carries out an action another operator requested and the tenant's
two-person rule held (two_person in the configuration: assert-absence, or a
limit raised above limit_raise_above): their command was refused
second_operator_required with the request's id. Only a different operator
holding the scope the action needs may confirm it; the requester confirming
is refused second_operator_required. The confirmation is a signed event, and
the action's reply is printed as the requester's command prints it.`,
		Args: cobra.ExactArgs(1),
	}
	c := addConnFlags(cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		var r wire.OpReply
		if err := c.op(wire.VerbConfirm, wire.ConfirmRequest{RequestID: args[0]}, &r); err != nil {
			return err
		}
		if c.json {
			return errors.Join(printJSON(r), refused(r))
		}
		if err := refused(r); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "confirmed request %s\n", args[0])
		if len(r.Settled) > 0 {
			return printSettled(c, r.Settled)
		}
		for _, v := range r.Versions {
			fmt.Fprintf(stdout, "version %d: limit %d, mode %s\n", v.Version, v.Limit, v.Mode)
		}
		return nil
	}
	return cmd
}
