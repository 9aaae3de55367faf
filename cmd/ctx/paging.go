package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextos/ledger/client"
	"github.com/spf13/cobra"
)

// pageFlags are the flags of a list command: ctx pages through the list
// (the daemon answers a page at a time) up to --limit rows, from --cursor.
type pageFlags struct {
	cmd    *cobra.Command
	limit  int
	cursor string
}

func addPageFlags(cmd *cobra.Command) *pageFlags {
	p := &pageFlags{cmd: cmd}
	cmd.Flags().IntVar(&p.limit, "limit", client.MaxListRows, "the most rows to show; ctx reads them a page at a time")
	cmd.Flags().StringVar(&p.cursor, "cursor", "", "continue from this cursor (printed when rows remain past --limit)")
	return p
}

func (p *pageFlags) check() error {
	if p.limit < 1 || p.limit > client.MaxListRows {
		return usageError("--limit must be 1 to %d, not %d", client.MaxListRows, p.limit)
	}
	return nil
}

// collect reads the list from --cursor up to --limit rows with page; when
// rows remain it says on stderr how to continue.
func collect[T any](ctx context.Context, p *pageFlags, page func(context.Context, client.Page) ([]T, string, error)) ([]T, error) {
	rows, err := client.Collect(ctx, client.Page{Cursor: p.cursor}, p.limit, page)
	var more *client.MoreRowsError
	if errors.As(err, &more) {
		fmt.Fprintf(p.cmd.ErrOrStderr(), "ctx: %d rows shown and more remain: continue with --cursor %s\n", more.Rows, more.Next)
		return rows, nil
	}
	return rows, err
}

// withDigest is an id as a table shows it: a shortened one with its
// SHA-256 (which --resource-digest takes).
func withDigest(s, digest string) string {
	if digest == "" {
		return s
	}
	return s + " sha256:" + digest
}
