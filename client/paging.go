package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextos/ledger/wire"
)

// Page asks for one page of a list verb (exposure, attempts, approvals,
// incidents, guarantee-history): at most Limit rows (0: the daemon's
// default, DefaultPageLimit; at most MaxPageLimit), after Cursor (""
// for the first page, else the next cursor of the page before, as it
// came: cursors are opaque).
type Page struct {
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

// The daemon's page sizes (docs/wire.md), and the most rows the calls that
// page through to the end collect.
const (
	DefaultPageLimit = wire.DefaultPageLimit
	MaxPageLimit     = wire.MaxPageLimit
	MaxListRows      = 10000
)

// ErrMoreRows is matched (errors.Is) by a *MoreRowsError.
var ErrMoreRows = errors.New("more rows than the bound")

// MoreRowsError is what Collect returns, with the rows it read, when it
// stopped at its bound before the end of the list: Next is the cursor to
// continue from.
type MoreRowsError struct {
	Rows int
	Next string
}

func (e *MoreRowsError) Error() string {
	return fmt.Sprintf("stopped after %d rows, more remain (continue from cursor %s)", e.Rows, e.Next)
}

// Is makes errors.Is(err, ErrMoreRows) hold.
func (e *MoreRowsError) Is(target error) bool { return target == ErrMoreRows }

// Collect pages through a list with page (one of the *Page calls, or a
// function around one) from p.Cursor to the end, p.Limit rows a page, and
// returns every row, at most max (0: MaxListRows). Past the bound it
// returns the rows it read and a *MoreRowsError. A daemon that answers a
// cursor with itself is an error, never a loop.
func Collect[T any](ctx context.Context, p Page, max int, page func(context.Context, Page) ([]T, string, error)) ([]T, error) {
	if max <= 0 {
		max = MaxListRows
	}
	var out []T
	for {
		if p.Limit == 0 || p.Limit > max-len(out) {
			p.Limit = min(max-len(out), MaxPageLimit)
		}
		rows, next, err := page(ctx, p)
		out = append(out, rows...)
		switch {
		case err != nil:
			return out, err
		case next == "":
			return out, nil
		case next == p.Cursor:
			return out, fmt.Errorf("the daemon answered cursor %s with itself", next)
		case len(out) >= max:
			return out, &MoreRowsError{Rows: len(out), Next: next}
		}
		p.Cursor = next
	}
}
