package main

import (
	"context"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/wire"
	"github.com/spf13/cobra"
)

func init() { register(newDecisionsCmd) }

// decisionColumns are the members the decisions table shows first.
var decisionColumns = []string{"seq", "at", "operation_id", "principal", "run_id", "capability_id", "status", "code", "evidence_refs", "resolution_refs"}

func newDecisionsCmd() *cobra.Command {
	var f wire.DecisionsRequest
	cmd := &cobra.Command{
		Use:   "decisions [--run RUN] [--operation OP] [--principal P] [--evidence-ref REF] [--resolution REF] [--since T] [--until T] [--replay --config FILE]",
		Short: "List and look up decision records",
		Long: `List the tenant's decision records, oldest first, a page at a time: what was
decided on each proposal and settlement, and what it depended on (the compiled
context's digest, the evidence refs cited and those that satisfied each
obligation, the resolutions read, the arguments' digest, the configuration's
digest and the trace id). Every filter given must match: --run, --operation,
--principal, --evidence-ref (a ref the decision cited), --resolution (a
resolution ref the decision's evidence gate read) and --since/--until (RFC 3339,
since inclusive, until exclusive). The daemon keeps the newest records of each
tenant in its read model (docs/decisions.md); older ones are in the audit export.

--replay builds the replay packet of every listed decision (ctx decisions packet)
and re-runs it offline, one line each: equal, or the first stage that differs;
exit 1 when any differs. With --resolution it replays every decision derived from
a resolution, to see which a corrected resolution would decide otherwise.`,
		Args: cobra.NoArgs,
	}
	fl := cmd.Flags()
	fl.StringVar(&f.RunID, "run", "", "only decisions of this run")
	fl.StringVar(&f.OperationID, "operation", "", "only decisions of this operation id")
	fl.StringVar(&f.Principal, "principal", "", "only decisions of this agent")
	fl.StringVar(&f.EvidenceRef, "evidence-ref", "", "only decisions that cited this evidence ref")
	fl.StringVar(&f.ResolutionRef, "resolution", "", "only decisions derived from this conflict resolution")
	fl.StringVar(&f.Since, "since", "", "only decisions recorded at or after this RFC 3339 time")
	fl.StringVar(&f.Until, "until", "", "only decisions recorded before this RFC 3339 time")
	var replay bool
	var src packetSource
	fl.BoolVar(&replay, "replay", false, "replay every listed decision from its packet (needs --config)")
	src.flags(cmd)
	cmd.AddCommand(newDecisionsPacketCmd())
	c := addConnFlags(cmd)
	pf := addPageFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		if err := pf.check(); err != nil {
			return err
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			rows, err := collect(ctx, pf, func(ctx context.Context, p client.Page) ([]map[string]any, string, error) {
				return cl.DecisionsPage(ctx, f, p)
			})
			if err != nil {
				return err
			}
			if replay {
				return replayDecisions(rows, &src, c)
			}
			if c.json {
				return printJSON(nonNil(rows))
			}
			printRows(rows, decisionColumns, c.wide())
			return nil
		})
	}
	return cmd
}
