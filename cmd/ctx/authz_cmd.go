package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/kernel"
	"github.com/spf13/cobra"
)

func init() {
	register(newApproveCmd)
	register(newDenyCmd)
	register(func() *cobra.Command { return newAuthorityCmd(true) })
	register(func() *cobra.Command { return newAuthorityCmd(false) })
	register(newRunCmd)
	register(newEvidenceCmd)
	register(func() *cobra.Command { return newListCmd("approvals") })
	register(func() *cobra.Command { return newListCmd("incidents") })
}

var digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func checkDigest(d string) error {
	if d == "" {
		return usageError("--digest is required (the action_digest of the approval_required reply)")
	}
	if !digestRE.MatchString(d) {
		return usageError("--digest must be 64 lowercase hex digits")
	}
	return nil
}

func checkRisk(r string) error {
	switch r {
	case "low", "medium", "high":
		return nil
	}
	return usageError("--risk takes low, medium or high, not %q", r)
}

func newApproveCmd() *cobra.Command {
	var digest, risk, reason string
	var expires time.Duration
	cmd := &cobra.Command{
		Use:   "approve --digest DIGEST [--risk high] [--expires 15m]",
		Short: "Approve one exact action (single use, with an expiry)",
		Long: `approve grants an approval bound to the action digest of an approval_required
reply and to the capability's risk. It is redeemable once, until it expires
(at most 24h). The agent then proposes the same action under a new operation
key with the printed approval id.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&digest, "digest", "", "the action digest to approve (required)")
	cmd.Flags().StringVar(&risk, "risk", "high", "the capability's risk: low, medium or high")
	cmd.Flags().DurationVar(&expires, "expires", 15*time.Minute, "how long the approval stays redeemable (at most 24h)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := checkDigest(digest); err != nil {
			return err
		}
		if err := checkRisk(risk); err != nil {
			return err
		}
		if expires <= 0 || expires > 24*time.Hour {
			return usageError("--expires must be more than 0 and at most 24h")
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			a, err := cl.Approve(ctx, client.ApproveRequest{ActionDigest: digest, Risk: risk, ExpiresIn: expires.String(), Reason: reason})
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(a)
			}
			fmt.Fprintf(stdout, "approved %s (risk %s) until %s\napproval id: %s\n", a.ActionDigest, a.Risk, a.ExpiresAt, a.ApprovalID)
			return nil
		})
	}
	return cmd
}

func newDenyCmd() *cobra.Command {
	var digest, approval, risk, reason string
	cmd := &cobra.Command{
		Use:   "deny (--digest DIGEST | --approval ID) --reason WHY",
		Short: "Answer a pending approval request no, or withdraw an unused approval, with a reason",
		Long: `deny with --digest answers a proposal waiting for an approval (the action digest
of its approval_required reply, at the capability's --risk) no: no approval of
it can then be redeemed. With --approval it withdraws an approval granted and
not yet redeemed. The reason is recorded in your name.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&digest, "digest", "", "the action digest to deny")
	cmd.Flags().StringVar(&approval, "approval", "", "an approval id to withdraw")
	cmd.Flags().StringVar(&risk, "risk", "high", "the capability's risk: low, medium or high")
	cmd.Flags().StringVar(&reason, "reason", "", "why (required)")
	cmd.RunE = func(cc *cobra.Command, _ []string) error {
		if digest == "" && approval == "" {
			return usageError("name --digest or --approval")
		}
		if digest != "" {
			if err := checkDigest(digest); err != nil {
				return err
			}
		}
		if approval != "" && !cc.Flags().Changed("risk") {
			risk = "" // the approval knows its risk
		}
		if risk != "" {
			if err := checkRisk(risk); err != nil {
				return err
			}
		}
		if strings.TrimSpace(reason) == "" {
			return usageError("--reason is required")
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			d, err := cl.Deny(ctx, client.DenyRequest{ApprovalID: approval, ActionDigest: digest, Risk: risk, Reason: reason})
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(d)
			}
			fmt.Fprintf(stdout, "denied %s (approval %s, risk %s): %s\n", d.ActionDigest, d.ApprovalID, d.Risk, d.Reason)
			return nil
		})
	}
	return cmd
}

func newAuthorityCmd(grant bool) *cobra.Command {
	verb, short := "revoke", "Revoke an agent's authority over a capability"
	if grant {
		verb, short = "grant", "Grant an agent authority over a capability"
	}
	var principal, capability, reason string
	cmd := &cobra.Command{
		Use:   verb + " --principal AGENT --capability ID",
		Short: short,
		Long: short + `. The change is recorded in the operator's
name and takes effect for the next proposal on every replica; a revocation
overrides the configuration's grant.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&principal, "principal", "", "the agent (required)")
	cmd.Flags().StringVar(&capability, "capability", "", "the capability id (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.RunE = func(*cobra.Command, []string) error {
		if principal == "" || capability == "" {
			return usageError("--principal and --capability are required")
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			f := cl.Revoke
			if grant {
				f = cl.Grant
			}
			ch, err := f(ctx, principal, capability, reason)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(ch)
			}
			state := "revoked from"
			if ch.Granted {
				state = "granted to"
			}
			note := ""
			if !ch.Recorded {
				note = " (already so; nothing recorded)"
			}
			fmt.Fprintf(stdout, "%s %s %s%s\n", ch.CapabilityID, state, ch.Principal, note)
			return nil
		})
	}
	return cmd
}

func newRunCmd() *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "run --run RUN",
		Short: "Show a run's budget: admitted, used, delegated and available calls and amount",
		Args:  cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&runID, "run", "", "the run id (required)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if runID == "" {
			return usageError("--run is required")
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			r, err := cl.Run(ctx, runID)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(r)
			}
			if !r.Admitted {
				fmt.Fprintf(stdout, "run %s is not admitted (no budget)\n", runID)
				return nil
			}
			k := kernel.Run(r)
			calls, amount := k.Available()
			head := "RUN\tPRINCIPAL\tCALLS\tUSED\tAVAILABLE\tAMOUNT\tUSED\tAVAILABLE"
			if c.wide() {
				head += "\tPARENT\tDELEGATED CALLS\tDELEGATED AMOUNT\tCHILDREN"
			}
			table(head, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d", r.RunID, r.Principal, r.Calls, r.UsedCalls, calls, r.Amount, r.UsedAmount, amount)
				if c.wide() {
					fmt.Fprintf(w, "\t%s\t%d\t%d\t%s", orDash(r.ParentRunID), r.DelegatedCalls, r.DelegatedAmount, orDash(strings.Join(r.Children, ",")))
				}
				fmt.Fprintln(w)
			})
			return nil
		})
	}
	return cmd
}

// readJSONFile reads one JSON value from path ("-" is standard input);
// a missing or invalid file is exit 1, named after its flag.
func readJSONFile(flag, path string) (json.RawMessage, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, &ExitError{Code: exitRefused, Err: fmt.Errorf("%s: %w", flag, err)}
	}
	if !json.Valid(b) {
		return nil, &ExitError{Code: exitRefused, Err: fmt.Errorf("%s %s: not valid JSON", flag, path)}
	}
	return json.RawMessage(b), nil
}

func newEvidenceCmd() *cobra.Command {
	var candidate, marker string
	cmd := &cobra.Command{
		Use:   "evidence (--candidate FILE | --marker FILE)",
		Short: "Publish an evidence candidate or a conflict marker (JSON file, - for stdin)",
		Long: `evidence publishes, in your name, one evidence candidate that a gated
capability's proposals may cite in evidence_refs, or one conflict marker (or
its resolution) over published evidence. The file holds one JSON object in
the kernel's form (docs/context.md).`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&candidate, "candidate", "", "file of one evidence candidate")
	cmd.Flags().StringVar(&marker, "marker", "", "file of one conflict marker")
	cmd.RunE = func(*cobra.Command, []string) error {
		if (candidate == "") == (marker == "") {
			return usageError("name exactly one of --candidate or --marker")
		}
		var req client.EvidenceRequest
		var err error
		if candidate != "" {
			req.Candidate, err = readJSONFile("--candidate", candidate)
		} else {
			req.Marker, err = readJSONFile("--marker", marker)
		}
		if err != nil {
			return err
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			d, err := cl.Evidence(ctx, req)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(d)
			}
			if ref, ok := d["ref"]; ok {
				fmt.Fprintf(stdout, "published evidence %v\n", ref)
				return nil
			}
			fmt.Fprintf(stdout, "recorded conflict %v: %v\n", d["conflict_id"], d["status"])
			return nil
		})
	}
	return cmd
}

// listColumns are the members a list verb's table shows first, in order;
// -o wide adds every other member.
var listColumns = map[string][]string{
	"approvals": {"action_digest", "capability_id", "principal", "run_id", "operation_key", "risk", "status", "requested_at"},
	"incidents": {"kind", "attempt_id", "code", "reason", "at"},
}

func newListCmd(verb string) *cobra.Command {
	short := map[string]string{"approvals": "Proposals waiting for an approval (approve or deny them by digest)",
		"incidents": "Incidents: contradicting observations, fenced executors, refused stored events"}[verb]
	cmd := &cobra.Command{Use: verb, Short: short, Args: cobra.NoArgs,
		Long: short + `, oldest first, a page at a time. A value an agent chose that is longer than
256 bytes is shown shortened, with its SHA-256 beside it (the member named
<name>_digest).`}
	c := addConnFlags(cmd)
	pf := addPageFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := pf.check(); err != nil {
			return err
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			f := cl.ApprovalsPage
			if verb == "incidents" {
				f = cl.IncidentsPage
			}
			rows, err := collect(ctx, pf, f)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(nonNil(rows))
			}
			printRows(rows, listColumns[verb], c.wide())
			return nil
		})
	}
	return cmd
}

// printRows prints JSON objects as a table: the preferred columns that
// any row has, then (wide) every other member.
func printRows(rows []map[string]any, preferred []string, wide bool) {
	seen := map[string]bool{}
	for _, r := range rows {
		for k := range r {
			seen[k] = true
		}
	}
	var cols []string
	for _, k := range preferred {
		if seen[k] {
			cols = append(cols, k)
			delete(seen, k)
		}
	}
	if wide || len(cols) == 0 {
		rest := make([]string, 0, len(seen))
		for k := range seen {
			rest = append(rest, k)
		}
		sort.Strings(rest)
		cols = append(cols, rest...)
	}
	if len(cols) == 0 {
		fmt.Fprintln(stdout, "none")
		return
	}
	head := make([]string, len(cols))
	for i, k := range cols {
		head[i] = strings.ToUpper(strings.ReplaceAll(k, "_", " "))
	}
	table(strings.Join(head, "\t"), func(w *tabwriter.Writer) {
		for _, r := range rows {
			cells := make([]string, len(cols))
			for i, k := range cols {
				cells[i] = cell(r[k])
			}
			fmt.Fprintln(w, strings.Join(cells, "\t"))
		}
	})
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return "-"
		}
		return strings.NewReplacer("\t", " ", "\n", " ").Replace(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
