package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/contextos/ledger/client"
	"github.com/spf13/cobra"
)

func init() { register(newGuaranteeCmd) }

func newGuaranteeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "guarantee",
		Short: "Change a guarantee's limit or mode at runtime, show its versions, import prior exposure",
		Long: `A guarantee's limit and mode are versioned in the stream: set-limit records a
new version (who, why, when) and every replica's next reservation decides
against it, whatever its configuration file says. Lowering a limit below what
is committed and held refuses new reservations and releases no hold.`,
	}
	cmd.AddCommand(newSetLimitCmd(), newGuaranteeHistoryCmd(), newGuaranteeImportCmd())
	return cmd
}

func newSetLimitCmd() *cobra.Command {
	var req client.SetLimitRequest
	cmd := &cobra.Command{
		Use:   "set-limit --guarantee G [--resource R] (--limit N | --mode enforce|observe) --reason TEXT",
		Short: "Record a new version of a guarantee's limit (or one resource's), or its mode",
		Args:  cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&req.GuaranteeID, "guarantee", "", "the guarantee id (required)")
	f.StringVar(&req.Resource, "resource", "", "set this resource's own limit instead of the guarantee's")
	f.Int64Var(&req.Limit, "limit", 0, "the new limit, in the guarantee's unit")
	f.StringVar(&req.Mode, "mode", "", "enforce or observe")
	f.StringVar(&req.Reason, "reason", "", "why, for the record (required)")
	cmd.RunE = func(*cobra.Command, []string) error {
		switch {
		case req.GuaranteeID == "":
			return usageError("--guarantee is required")
		case req.Reason == "":
			return usageError("--reason is required")
		case req.Limit == 0 && req.Mode == "":
			return usageError("set --limit or --mode")
		case req.Limit < 0:
			return usageError("--limit must be positive")
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			rows, err := cl.SetLimit(ctx, req)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(rows)
			}
			last := rows[len(rows)-1]
			fmt.Fprintf(stdout, "guarantee %s is at version %d\n", req.GuaranteeID, last.Version)
			return nil
		})
	}
	return cmd
}

func newGuaranteeHistoryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history GUARANTEE",
		Short: "Show every version of a guarantee: its pin, then each change with who, when and why",
		Args:  cobra.ExactArgs(1),
	}
	c := addConnFlags(cmd)
	pf := addPageFlags(cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		if err := pf.check(); err != nil {
			return err
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			rows, err := collect(ctx, pf, func(ctx context.Context, p client.Page) ([]client.VersionRow, string, error) {
				return cl.GuaranteeHistoryPage(ctx, args[0], p)
			})
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(rows)
			}
			table("VERSION\tAT\tOPERATOR\tRESOURCE\tLIMIT\tMODE\tREASON", func(w *tabwriter.Writer) {
				for _, r := range rows {
					limit := "-"
					if r.Limit != 0 {
						limit = fmt.Sprint(r.Limit)
					}
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Version, orDash(r.At), orDash(r.Operator), orDash(withDigest(r.Resource, r.ResourceDigest)), limit, orDash(r.Mode),
						withDigest(r.Reason, r.ReasonDigest))
				}
			})
			return nil
		})
	}
	return cmd
}
