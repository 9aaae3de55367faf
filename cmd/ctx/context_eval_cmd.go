package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/contextos/ledger/internal/contexteval"
	"github.com/contextos/ledger/internal/evalcase"
	"github.com/contextos/ledger/kernel"
	"github.com/spf13/cobra"
)

// newContextEvalCmd returns `ctx context eval`: the evaluation protocol of
// docs/context.md on a directory of decision cases. It prints the report
// (Markdown, or JSON with --json), optionally writes the frontier chart,
// and exits 0 when the gate made no false closure, 1 when it made one or a
// case is invalid, 2 on usage.
func newContextEvalCmd() *cobra.Command {
	var casesDir, packPath, chartPath, chartLink string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "eval --cases DIR [--pack PACK] [--chart PNG] [--json]",
		Short: "Evaluate the evidence gate on decision cases against an independent grader",
		Long: `Eval loads every case (*.json, recursively) under --cases, grades each from
its labels alone, compiles it with the kernel at four levels (retrieval,
coverage, eligibility, gate) and prints the report: false closures (the gate
allowed a commit the grader refuses), false abstentions, coverage and
accuracy, by slice and variant, and the accuracy-coverage frontier by risk.

--pack replaces every case's pack with a candidate policy, to evaluate it on
held-out cases. --chart writes the frontier as a PNG (--chart-link is the
path the Markdown links to; default the --chart path).

Exit codes: 0 when the gate made no false closure, 1 when it made one or a
case is invalid, 2 on usage.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			invalid := func(err error) error { return &ExitError{Code: exitRefused, Err: err} }
			if casesDir == "" {
				return usageError("--cases is required\n\n%s", c.UsageString())
			}
			cases, err := evalcase.Load(casesDir)
			if err != nil {
				return invalid(err)
			}
			var opt contexteval.Options
			if packPath != "" {
				b, err := os.ReadFile(packPath)
				if err != nil {
					return invalid(err)
				}
				p, err := kernel.ParseContextPack(b)
				if err != nil {
					return invalid(fmt.Errorf("%s: %w", packPath, err))
				}
				opt.Pack = &p
			}
			rep, err := contexteval.Run(cases, opt)
			if err != nil {
				return invalid(err)
			}
			if chartPath != "" {
				var png bytes.Buffer
				if err := rep.WriteChart(&png); err != nil {
					return err
				}
				if err := os.WriteFile(chartPath, png.Bytes(), 0o644); err != nil {
					return invalid(err)
				}
			}
			if asJSON {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(c.OutOrStdout(), "%s\n", b)
				if err != nil {
					return err
				}
			} else if _, err := fmt.Fprint(c.OutOrStdout(), rep.Markdown(cmpOr(chartLink, chartPath))); err != nil {
				return err
			}
			if n := rep.Total.FalseClosures; n > 0 {
				return &ExitError{Code: 1, Err: errors.New(fmt.Sprint(n, " false closure(s)"))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&casesDir, "cases", "", "directory of decision cases (required)")
	f.StringVar(&packPath, "pack", "", "ContextPack JSON file that replaces every case's pack (optional)")
	f.StringVar(&chartPath, "chart", "", "write the accuracy-coverage frontier as a PNG to this file (optional)")
	f.StringVar(&chartLink, "chart-link", "", "path the Markdown report links the chart by (default: --chart)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON, with every case's result")
	return cmd
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
