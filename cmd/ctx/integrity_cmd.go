package main

import (
	"context"
	"fmt"

	"github.com/contextos/ledger/client"
	"github.com/spf13/cobra"
)

func init() { register(newIntegrityCmd) }

func newIntegrityCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "integrity",
		Short: "Show the audit log's integrity: an open incident and the witnesses' state",
		Long: `integrity shows whether a configured witness answered that the tenant's audit
log shrank or forked (its streams were deleted and republished, or restored
from a copy older than what the witness saw). While such an incident is open
every proposal is refused log_integrity_failed; settlement and reconciliation
go on. It also shows the witness policy and whether the latest checkpoint was
cosigned. Resolve an incident with "ctx integrity resolve" (docs/audit.md,
"Fail closed").`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		return c.do(func(ctx context.Context, cl *client.Client) error {
			st, err := cl.Integrity(ctx)
			if err != nil {
				return err
			}
			return printIntegrity(c.json, cl.Tenant(), st)
		})
	}
	cmd.AddCommand(newIntegrityResolveCmd())
	return cmd
}

func printIntegrity(asJSON bool, tenant string, st client.IntegrityState) error {
	if asJSON {
		return printJSON(map[string]any{"tenant": tenant, "integrity": st})
	}
	if st.Open != nil {
		fmt.Fprintf(stdout, "audit log of %s: INCIDENT %d OPEN: witness %s answered that the log %s (a checkpoint of %d records; it had cosigned %d): %s\n",
			tenant, st.Incidents, st.Open.Witness, st.Open.Kind, st.Open.LogSize, st.Open.WitnessSize, st.Open.Reason)
	} else {
		fmt.Fprintf(stdout, "audit log of %s: no incident open (%d recorded, %d resolutions)\n", tenant, st.Incidents, st.Resolutions)
	}
	if st.Policy != "" {
		fmt.Fprintf(stdout, "witnesses: %s (witness_policy %s)", st.Witnessing, st.Policy)
		if st.Reason != "" {
			fmt.Fprintf(stdout, ": %s", st.Reason)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

func newIntegrityResolveCmd() *cobra.Command {
	var resolution, artifact, statement string
	cmd := &cobra.Command{
		Use:   "resolve --resolution restored|rotated --artifact REF --statement TEXT",
		Short: "Resolve an audit log integrity incident, with a signed statement of what happened",
		Long: `resolve records an operator's resolution of the incident a witness's refusal
opened, signed into the log with the operator's name: --resolution restored
(the streams were restored from a copy holding at least the witnessed
history, and the witness cosigns again) or rotated (the history is lost: the
runtime key was rotated with "contextosd keys rotate", and the witness's
operator reset the log at the witness), the ticket or record behind it
(--artifact) and what happened (--statement). Proposals are dispatched again
once it is recorded; a witness that still refuses opens a new incident.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&resolution, "resolution", "", "restored or rotated (required)")
	cmd.Flags().StringVar(&artifact, "artifact", "", "the ticket or record behind the resolution (required)")
	cmd.Flags().StringVar(&statement, "statement", "", "what happened, signed into the log (required)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if resolution == "" || artifact == "" || statement == "" {
			return usageError("--resolution, --artifact and --statement are required")
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			st, err := cl.ResolveIntegrity(ctx, resolution, artifact, statement)
			if err != nil {
				return err
			}
			return printIntegrity(c.json, cl.Tenant(), st)
		})
	}
	return cmd
}
