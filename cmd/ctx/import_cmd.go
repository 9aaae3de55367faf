package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/wire"
	"github.com/spf13/cobra"
)

func newGuaranteeImportCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "import --file FILE",
		Short: "Record exposure committed before adoption, counted as committed on each resource",
		Long: `Reads a CSV file (header: guarantee,resource,window,amount,reference; window may
be omitted) or a JSON array of {guarantee_id, resource, window, amount, reference}
("-" reads standard input), at most 512 KiB and 1000 rows, and records each row as
committed exposure on its resource ledger, signed and attributed to you. A row
that would take the resource over its limit is refused (shared_guarantee_exceeded):
raise the limit first with ctx guarantee set-limit if the prior exposure is real.
A reference is imported once per resource: running the same file again imports
nothing twice. Each row's outcome is printed; any refused row is exit 1.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&file, "file", "", "the CSV or JSON file of rows (required)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if file == "" {
			return usageError("--file is required")
		}
		b, err := readBounded(file, wire.MaxImportFileBytes)
		if err != nil {
			return &ExitError{Code: exitRefused, Err: err}
		}
		f, err := client.ParseImportFile(b)
		if err != nil {
			return &ExitError{Code: exitRefused, Err: fmt.Errorf("refused %s: %v", wire.CodeRequestMalformed, err)}
		}
		return c.do(func(ctx context.Context, cl *client.Client) error {
			results := slices.Clone(f.Refused)
			if len(f.Rows) > 0 {
				got, err := cl.ImportExposure(ctx, f.Rows)
				if err != nil {
					return err
				}
				for _, r := range got {
					r.Row = f.Lines[r.Row-1] // the file's line or index
					results = append(results, r)
				}
			}
			slices.SortStableFunc(results, func(a, b client.ImportResult) int { return a.Row - b.Row })
			return printImports(c, results)
		})
	}
	return cmd
}

// readBounded reads at most limit bytes of path ("-": standard input), and
// refuses a longer file.
func readBounded(path string, limit int64) ([]byte, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("refused %s: %s is larger than %d bytes; split it", wire.CodeRequestMalformed, path, limit)
	}
	return b, nil
}

func printImports(c *connFlags, rows []client.ImportResult) error {
	var failed error
	for _, r := range rows {
		if r.Status == wire.ImportRefused && failed == nil {
			failed = &ExitError{Code: exitRefused, Err: fmt.Errorf("row %d (%s): refused %s: %s", r.Row, r.Reference, r.Code, r.Reason)}
		}
	}
	if c.json {
		return errors.Join(printJSON(nonNil(rows)), failed)
	}
	table("ROW\tREFERENCE\tSTATUS\tCODE\tREASON", func(w *tabwriter.Writer) {
		for _, r := range rows {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", r.Row, orDash(r.Reference), r.Status, orDash(string(r.Code)), orDash(r.Reason))
		}
	})
	return failed
}

func init() { register(newReportCmd) }

func newReportCmd() *cobra.Command {
	var guarantee string
	cmd := &cobra.Command{
		Use:   "report [--guarantee G]",
		Short: "Outcomes per guarantee and window: applied, denials by code, pending, unknown, stranded exposure by age",
		Long: `Computed from the runtime's read model: per guarantee and window, the attempts
applied and their amount, the proposals denied by code, the attempts still
pending or unknown, the exposure open attempts hold by age (under 1 minute,
1 minute to 1 hour, 1 hour to 1 day, a day or more) and the prior exposure
imported.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&guarantee, "guarantee", "", "only this guarantee")
	cmd.RunE = func(*cobra.Command, []string) error {
		return c.do(func(ctx context.Context, cl *client.Client) error {
			rows, err := cl.Report(ctx, guarantee)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(nonNil(rows))
			}
			printReport(stdout, rows)
			return nil
		})
	}
	return cmd
}

// printReport writes the report's table.
func printReport(out io.Writer, rows []client.OutcomeRow) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GUARANTEE\tWINDOW\tAPPLIED\tAMOUNT\tDENIED\tPENDING\tUNKNOWN\tSTRANDED <1m\t1m-1h\t1h-1d\t>=1d\tIMPORTED")
	for _, r := range rows {
		denied := ""
		for _, d := range r.Denials {
			if denied != "" {
				denied += ","
			}
			denied += fmt.Sprintf("%s=%d", d.Code, d.Count)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%d\t%d", r.GuaranteeID, orDash(r.Window), r.Applied, r.AppliedAmount, orDash(denied), r.Pending, r.Unknown)
		for _, age := range wire.AgeBuckets {
			var s string
			for _, b := range r.Stranded {
				if b.Age == age && b.Attempts > 0 {
					s = fmt.Sprintf("%d (%d)", b.Amount, b.Attempts)
				}
			}
			fmt.Fprintf(w, "\t%s", orDash(s))
		}
		fmt.Fprintf(w, "\t%d\n", r.Imported)
	}
	_ = w.Flush()
}
