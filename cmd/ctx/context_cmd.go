package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/contextos/ledger/kernel"
	"github.com/spf13/cobra"
)

func init() { register(newContextCmd) }

// newContextCmd returns `ctx context`, whose `compile` subcommand runs the
// kernel's context compiler offline on files: it prints the CompiledContext
// as indented JSON and exits 0 when the gate allows commit, 1 when it does
// not or on invalid input, 2 on usage.
func newContextCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Compile proof-carrying context and evaluate its evidence gate",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return usageError("missing subcommand\n\n%s", c.UsageString())
		},
	}
	var packPath, runPath, evidencePath, markersPath, inputsPath string
	compile := &cobra.Command{
		Use:   "compile --pack PACK --run RUN --evidence EVIDENCE [--markers MARKERS] [--inputs INPUTS]",
		Short: "Compile a context pack, run context, evidence and conflict markers",
		Long: `Compile runs the kernel's context compiler on JSON files and prints the
CompiledContext (payload, eligibility, dependencies, negative state and the
evidence gate) as indented JSON on stdout.

Exit codes: 0 when the gate's commit_allowed is true, 1 when it is false or
an input is invalid, 2 on usage.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			invalid := func(err error) error { return &ExitError{Code: exitRefused, Err: err} }
			for _, req := range []struct{ flag, value string }{
				{"--pack", packPath}, {"--run", runPath}, {"--evidence", evidencePath},
			} {
				if req.value == "" {
					return usageError("%s is required\n\n%s", req.flag, c.UsageString())
				}
			}
			read := func(path string) ([]byte, error) {
				b, err := os.ReadFile(path)
				if err != nil {
					return nil, invalid(err)
				}
				return b, nil
			}
			b, err := read(packPath)
			if err != nil {
				return err
			}
			pack, err := kernel.ParseContextPack(b)
			if err != nil {
				return invalid(fmt.Errorf("%s: %w", packPath, err))
			}
			if b, err = read(runPath); err != nil {
				return err
			}
			run, err := kernel.ParseRunContext(b)
			if err != nil {
				return invalid(fmt.Errorf("%s: %w", runPath, err))
			}
			if b, err = read(evidencePath); err != nil {
				return err
			}
			evidence, err := kernel.ParseEvidence(b)
			if err != nil {
				return invalid(fmt.Errorf("%s: %w", evidencePath, err))
			}
			var markers []kernel.EvidenceConflictMarker
			if markersPath != "" {
				if b, err = read(markersPath); err != nil {
					return err
				}
				if markers, err = kernel.ParseMarkers(b); err != nil {
					return invalid(fmt.Errorf("%s: %w", markersPath, err))
				}
			}
			var inputs kernel.ContextInputs
			if inputsPath != "" {
				if b, err = read(inputsPath); err != nil {
					return err
				}
				if inputs, err = kernel.ParseContextInputs(b); err != nil {
					return invalid(fmt.Errorf("%s: %w", inputsPath, err))
				}
			}
			compiled, err := kernel.CompileContextWith(pack, run, evidence, markers, inputs)
			if err != nil {
				return invalid(err)
			}
			out, err := json.MarshalIndent(compiled, "", "  ")
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(c.OutOrStdout(), "%s\n", out); err != nil {
				return err
			}
			if r := kernel.GateRefusal(compiled.Gate); r != nil {
				return &ExitError{Code: 1, Err: r}
			}
			return nil
		},
	}
	f := compile.Flags()
	f.StringVar(&packPath, "pack", "", "ContextPack JSON file (required)")
	f.StringVar(&runPath, "run", "", "RunContext JSON file (required)")
	f.StringVar(&evidencePath, "evidence", "", "JSON array of evidence candidates (required)")
	f.StringVar(&markersPath, "markers", "", "JSON array of evidence conflict markers (optional)")
	f.StringVar(&inputsPath, "inputs", "", "JSON object of typed inputs: policy and tool registry snapshots, memory, session state (optional)")
	cmd.AddCommand(compile, newContextEvalCmd(), newContextPublishCmd(), newContextPacksCmd(), newContextPromoteCmd(), newContextRollbackCmd(), newContextDiffCmd())
	return cmd
}
