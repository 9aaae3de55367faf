package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
	"github.com/spf13/cobra"
)

func init() {
	register(newGuardrailCmd)
	register(newWaiverCmd)
}

// controls is the data of the guardrails, guardrail and waiver verbs: the
// tenant's guardrails and the waivers in force after the verb.
type controls struct {
	Guardrails []kernel.GuardrailSet  `json:"guardrails"`
	Waivers    []kernel.WaiverGranted `json:"waivers"`
}

// controlOp sends a guardrail verb and prints what the tenant holds after
// it: its guardrails (guardrail) or its waivers in force (waiver).
func controlOp(c *connFlags, verb string, req any, show string) error {
	var r wire.OpReply
	if err := c.op(verb, req, &r); err != nil {
		return err
	}
	failed := refused(wire.OpReply{OK: r.OK, Code: r.Code, Reason: r.Reason})
	if c.json {
		return errors.Join(printJSON(r), failed)
	}
	if !r.OK {
		return failed
	}
	var data controls
	if b, err := json.Marshal(r.Data); err != nil || json.Unmarshal(b, &data) != nil {
		return fmt.Errorf("%s: bad reply data", verb)
	}
	if show == "waiver" {
		table("WAIVER\tGUARDRAIL\tFOR\tUNTIL\tGRANTED BY\tGRANTED\tREASON", func(w *tabwriter.Writer) {
			for _, x := range data.Waivers {
				what := "run " + x.RunID
				if x.RunID == "" {
					s, _ := wire.Shorten(x.Resource)
					what = "resource " + s
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.WaiverID, x.GuardrailID, what, x.Until.UTC().Format(time.RFC3339), x.Operator,
					x.GrantedAt.UTC().Format(time.RFC3339), orDash(x.Reason))
			}
		})
		return nil
	}
	table("GUARDRAIL\tCAPABILITY\tRULE\tSET BY\tREASON", func(w *tabwriter.Writer) {
		for _, g := range data.Guardrails {
			rule := fmt.Sprintf("at most %d per proposal", g.MaxAmount)
			if g.Disabled {
				rule = "disabled"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", g.GuardrailID, g.CapabilityID, rule, g.Operator, orDash(g.Reason))
		}
	})
	return nil
}

func newGuardrailCmd() *cobra.Command {
	var capability, reason string
	var disabled bool
	var maxAmount int64
	cmd := &cobra.Command{
		Use:   "guardrail list | set ID --capability C (--disabled | --max-amount N) | remove ID",
		Short: "List, set or remove the tenant's guardrails",
		Long: `guardrail lists the tenant's guardrails (list), sets one (set ID: the
capability --disabled, or at most --max-amount per proposal on any guarantee or
from its run) or removes one and its waivers (remove ID). The runtime's kernel
refuses a proposal a guardrail covers guardrail_refused unless a waiver in force
lets its run or resource through (ctx waiver). Setting and removing need the
guardrails scope, and are recorded and signed in the operator's name; towerd
publishes the same guardrail to every runtime of a tenant.`,
		Args: cobra.RangeArgs(1, 2),
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&capability, "capability", "", "the capability the guardrail covers (set)")
	cmd.Flags().BoolVar(&disabled, "disabled", false, "refuse every proposal of the capability (set)")
	cmd.Flags().Int64Var(&maxAmount, "max-amount", 0, "refuse a proposal binding more than this (set)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		switch {
		case args[0] == "list" && len(args) == 1:
			if capability != "" || disabled || maxAmount != 0 || reason != "" {
				return usageError("guardrail list takes no flag but the connection's")
			}
			return controlOp(c, kernel.VerbGuardrails, struct{}{}, "guardrail")
		case args[0] == "set" && len(args) == 2:
			if capability == "" || disabled == (maxAmount != 0) || maxAmount < 0 {
				return usageError("guardrail set ID needs --capability and one of --disabled or a positive --max-amount")
			}
			return controlOp(c, kernel.VerbGuardrail, wire.GuardrailRequest{GuardrailID: args[1], CapabilityID: capability, Disabled: disabled,
				MaxAmount: maxAmount, Reason: reason}, "guardrail")
		case args[0] == "remove" && len(args) == 2:
			if capability != "" || disabled || maxAmount != 0 {
				return usageError("guardrail remove ID takes only --reason")
			}
			return controlOp(c, kernel.VerbGuardrail, wire.GuardrailRequest{GuardrailID: args[1], Remove: true, Reason: reason}, "guardrail")
		}
		return usageError("guardrail takes list, set ID or remove ID")
	}
	return cmd
}

func newWaiverCmd() *cobra.Command {
	var guardrail, run, resource, reason, until string
	var lasts time.Duration
	cmd := &cobra.Command{
		Use:   "waiver list | grant ID --guardrail G (--run R | --resource X) --for D --reason WHY | revoke ID",
		Short: "List, grant or revoke waivers of the tenant's guardrails",
		Long: `waiver lists the waivers in force (list), grants one (grant ID: the
proposals of --run, or on --resource, pass --guardrail for --for, at most 168h,
or --until an RFC 3339 time, with a --reason) or ends one now (revoke ID).
Granting and revoking need the guardrails scope, and are recorded and signed in
the operator's name.`,
		Args: cobra.RangeArgs(1, 2),
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&guardrail, "guardrail", "", "the guardrail waived (grant)")
	cmd.Flags().StringVar(&run, "run", "", "the run let through (grant)")
	cmd.Flags().StringVar(&resource, "resource", "", "the resource let through (grant)")
	cmd.Flags().DurationVar(&lasts, "for", 0, "how long the waiver lasts (grant)")
	cmd.Flags().StringVar(&until, "until", "", "when the waiver ends, RFC 3339 (grant; instead of --for)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record (required with grant)")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		grantFlags := guardrail != "" || run != "" || resource != "" || lasts != 0 || until != ""
		switch {
		case args[0] == "list" && len(args) == 1:
			if grantFlags || reason != "" {
				return usageError("waiver list takes no flag but the connection's")
			}
			return controlOp(c, kernel.VerbGuardrails, struct{}{}, "waiver")
		case args[0] == "grant" && len(args) == 2:
			if guardrail == "" || (run == "") == (resource == "") || reason == "" || (lasts == 0) == (until == "") {
				return usageError("waiver grant ID needs --guardrail, one of --run or --resource, one of --for or --until, and --reason")
			}
			if until == "" {
				until = time.Now().Add(lasts).UTC().Format(time.RFC3339)
			}
			return controlOp(c, kernel.VerbWaiver, wire.WaiverRequest{WaiverID: args[1], GuardrailID: guardrail, RunID: run, Resource: resource,
				Until: until, Reason: reason}, "waiver")
		case args[0] == "revoke" && len(args) == 2:
			if grantFlags {
				return usageError("waiver revoke ID takes only --reason")
			}
			return controlOp(c, kernel.VerbWaiver, wire.WaiverRequest{WaiverID: args[1], Revoke: true, Reason: reason}, "waiver")
		}
		return usageError("waiver takes list, grant ID or revoke ID")
	}
	return cmd
}
