package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/contextos/ledger/wire"
)

// FuzzParseCursor: never panics; an accepted cursor is exactly the text its
// key writes (one spelling a position), within MaxCursorBytes, with key
// parts of the kinds its list names.
func FuzzParseCursor(f *testing.F) {
	long := strings.Repeat("r", 300)
	for _, c := range []cursor{
		{listExposure, exposureKey(wire.ExposureRow{GuaranteeID: "refunds-per-order", Resource: "ord_1"})},
		{listExposure, exposureKey(wire.ExposureRow{GuaranteeID: "refunds-per-order", Resource: long})},
		{listAttempts, attemptKey(wire.AttemptRow{AttemptID: "01JABCDEFGHJKMNPQRSTVWXYZ0", GuaranteeID: "g", Resource: "ord_é"})},
		{listApprovals, approvalKey(wire.PendingApproval{Seq: 42})},
		{listIncidents, incidentKey(wire.Incident{Key: wire.IncidentKey{Seq: 7, N: 2}})},
		{listVersions, versionKey(wire.VersionRow{Version: 3})},
	} {
		f.Add(c.String())
	}
	for _, s := range []string{"", "e", "e.", "a..", "p.MDAwMDAwMDAwMDAwMDAwMDAwNDI=", "p.MDAwMDAwMDAwMDAwMDAwMDAwNDI", "x.YQ", "v.-_", "e.YQ.YQ.YQ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCursor(s)
		if err != nil {
			return
		}
		if got := c.String(); got != s {
			t.Fatalf("parseCursor(%q) writes back as %q", s, got)
		}
		if len(s) > wire.MaxCursorBytes {
			t.Fatalf("accepted a cursor of %d bytes", len(s))
		}
		kinds := cursorParts[c.list]
		if len(c.key) != len(kinds) {
			t.Fatalf("%q: %d key parts for list %c", s, len(c.key), c.list)
		}
		for i, p := range c.key {
			switch kinds[i] {
			case 's':
				if len(p) > wire.ShortenAbove {
					t.Fatalf("%q: part %d of %d bytes", s, i, len(p))
				}
			case 'd':
				if p != "" && !isDigest(p) {
					t.Fatalf("%q: part %d %q is no digest", s, i, p)
				}
			case 'n':
				if len(p) != 20 || num(parseNum(p)) != p {
					t.Fatalf("%q: part %d %q is no number", s, i, p)
				}
			}
		}
	})
}

func TestParseCursorRefuses(t *testing.T) {
	good := cursor{listExposure, []string{"g", "ord_1", ""}}.String()
	if _, err := parseCursor(good); err != nil {
		t.Fatalf("%q: %v", good, err)
	}
	for _, s := range []string{
		"", "e", "E.Zw.b3JkXzE.", "e.Zw.b3JkXzE", "e.Zw.b3JkXzE..", // wrong list, too few or too many parts
		"e.Zw.b3JkXzE.eA",               // a digest that is not one
		"e.Zw==.b3JkXzE.",               // padded base64
		"e.Zw.b3JkXzE+.",                // standard, not URL, base64
		"p.NDI",                         // a number not 20 digits
		"p.MDAwMDAwMDAwMDAwMDAwMDAwNGE", // 20 characters, not digits
		"e.Zw." + strings.Repeat("YWFh", 90) + ".",           // a string part over ShortenAbove
		"a" + strings.Repeat(".YQ", wire.MaxCursorBytes/3+1), // over MaxCursorBytes
	} {
		if c, err := parseCursor(s); err == nil {
			t.Errorf("parseCursor(%q) accepted %+v", s, c)
		}
	}
}

// TestPageWalk: paging through a list returns each row exactly once, in
// key order, also when rows are added before and after the cursor and
// removed between pages; a page stops at its limit and at its budget.
func TestPageWalk(t *testing.T) {
	res := func(i int) string {
		if i%3 == 0 { // long ids, sharing their first ShortenAbove bytes
			return strings.Repeat("x", wire.ShortenAbove) + fmt.Sprint(i)
		}
		return fmt.Sprintf("ord_%03d", i)
	}
	var rows []wire.ExposureRow
	for i := 0; i < 50; i++ {
		rows = append(rows, wire.ExposureRow{GuaranteeID: "g", Resource: res(i)})
	}
	p := pager{list: listExposure, limit: 7, budget: 1 << 20}
	seen := map[string]int{}
	var last []string // the key of the last row shown
	cur := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("no end")
		}
		if cur != "" {
			c, err := parseCursor(cur)
			if err != nil {
				t.Fatal(err)
			}
			p.after = c.key
		}
		out, next := page(p, rows, exposureKey, showExposure)
		if len(out) > p.limit {
			t.Fatalf("page of %d rows, limit %d", len(out), p.limit)
		}
		for _, r := range out {
			if len(r.Resource) > wire.ShortPrefix+len(wire.Ellipsis) {
				t.Fatalf("row shown with a %d-byte resource", len(r.Resource))
			}
			seen[r.Resource+r.ResourceDigest]++
		}
		if len(out) > 0 {
			c, _ := parseCursor(next)
			if next != "" && slices.Compare(c.key, last) <= 0 {
				t.Fatalf("cursor %q does not move on", next)
			}
			last = c.key
		}
		if next == "" {
			break
		}
		cur = next
		// Between pages: a row before the cursor and one after it are added,
		// and the last row shown is removed.
		rows = append(rows, wire.ExposureRow{GuaranteeID: "a", Resource: fmt.Sprint("new", pages)}, wire.ExposureRow{GuaranteeID: "z", Resource: fmt.Sprint("new", pages)})
		rows = slices.DeleteFunc(rows, func(r wire.ExposureRow) bool { return slices.Equal(exposureKey(r), last) })
	}
	for i := 0; i < 50; i++ {
		r, d := wire.Shorten(res(i))
		if n := seen[r+d]; n != 1 {
			t.Errorf("%s shown %d times", res(i), n)
		}
	}
	for i := 0; i < 100; i++ {
		if n := seen[fmt.Sprint("new", i)]; n > 1 {
			t.Errorf("new%d shown %d times", i, n)
		}
	}
	// Budget: a page stops before its rows pass it, keeping at least one.
	p = pager{list: listExposure, limit: wire.MaxPageLimit, budget: 1000}
	out, next := page(p, rows[:50], exposureKey, showExposure)
	b, _ := json.Marshal(out)
	if len(out) == 0 || len(b) > p.budget+len(out) || next == "" {
		t.Fatalf("budget %d: %d rows of %d bytes, next %q", p.budget, len(out), len(b), next)
	}
	p.budget = 1
	if out, next := page(p, rows[:50], exposureKey, showExposure); len(out) != 1 || next == "" {
		t.Fatalf("a budget below one row: %d rows, next %q", len(out), next)
	}
}

// TestPageOrderIsIDOrder: for ids of at most ShortenAbove bytes the key
// order is the ids' own order, so views read as before.
func TestPageOrderIsIDOrder(t *testing.T) {
	ids := []string{"b", "a", "ord_10", "ord_9", "é", "", "a\x00", strings.Repeat("z", wire.ShortenAbove)}
	var rows []wire.AttemptRow
	for i, id := range ids {
		rows = append(rows, wire.AttemptRow{AttemptID: fmt.Sprintf("att%02d", 10-i), GuaranteeID: "g", Resource: id})
		rows = append(rows, wire.AttemptRow{AttemptID: "att99", GuaranteeID: "g", Resource: id})
	}
	out, next := page(pager{list: listAttempts, limit: wire.MaxPageLimit, budget: 1 << 20}, rows, attemptKey, showAttempt)
	if next != "" || len(out) != len(rows) {
		t.Fatalf("%d rows, next %q", len(out), next)
	}
	if !slices.IsSortedFunc(out, func(a, b wire.AttemptRow) int {
		if c := strings.Compare(a.AttemptID, b.AttemptID); c != 0 {
			return c
		}
		return strings.Compare(a.Resource, b.Resource)
	}) {
		t.Fatalf("not in id order: %+v", out)
	}
}

// TestShowShortens: each row kind shows every agent-chosen string over
// ShortenAbove bytes as its prefix with its digest beside it, and nothing
// shorter changes.
func TestShowShortens(t *testing.T) {
	long := strings.Repeat("é", wire.ShortenAbove) // two bytes each
	d := wire.Digest(long)
	check := func(what, shown, digest string) {
		t.Helper()
		if digest != d || !strings.HasSuffix(shown, wire.Ellipsis) || !utf8.ValidString(shown) || len(shown) > wire.ShortPrefix+len(wire.Ellipsis) {
			t.Errorf("%s: shown %q, digest %q", what, shown, digest)
		}
	}
	a := showAttempt(wire.AttemptRow{Resource: long, RunID: long, LastReason: long})
	check("attempt resource", a.Resource, a.ResourceDigest)
	check("attempt run", a.RunID, a.RunIDDigest)
	check("attempt reason", a.LastReason, a.LastReasonDigest)
	e := showExposure(wire.ExposureRow{Resource: long})
	check("exposure resource", e.Resource, e.ResourceDigest)
	v := showVersion(wire.VersionRow{Resource: long, Reason: long})
	check("version resource", v.Resource, v.ResourceDigest)
	check("version reason", v.Reason, v.ReasonDigest)
	in := showIncident(wire.Incident{Reason: long})
	check("incident reason", in.Reason, in.ReasonDigest)
	s := showSettle(wire.SettleRow{Reason: long})
	check("settle reason", s.Reason, s.ReasonDigest)
	args, _ := json.Marshal(map[string]any{"order_id": long, long: 1, "amount_minor": 5})
	p := showApproval(wire.PendingApproval{OperationKey: long, RunID: long, Arguments: args})
	check("approval key", p.OperationKey, p.OperationKeyDigest)
	check("approval run", p.RunID, p.RunIDDigest)
	if p.ArgumentsDigest != wire.Digest(string(args)) || strings.Contains(string(p.Arguments), long) ||
		!strings.Contains(string(p.Arguments), "sha256:"+d) || !json.Valid(p.Arguments) {
		t.Errorf("approval arguments %s, digest %s", p.Arguments, p.ArgumentsDigest)
	}
	many := map[string]int{}
	for i := 0; i < 1000; i++ {
		many[fmt.Sprint("k", i)] = i
	}
	args, _ = json.Marshal(many)
	if p := showApproval(wire.PendingApproval{Arguments: args}); p.Arguments != nil || p.ArgumentsBytes != len(args) || p.ArgumentsDigest == "" {
		t.Errorf("arguments of %d bytes in short strings: %d shown, bytes %d", len(args), len(p.Arguments), p.ArgumentsBytes)
	}
	short := wire.AttemptRow{Resource: "ord_1", RunID: strings.Repeat("r", wire.ShortenAbove), LastReason: "pending"}
	if got := showAttempt(short); got != short {
		t.Errorf("a short row changed: %+v", got)
	}
}

// TestPagerRefuses: a limit out of range or a cursor of another list is
// request_malformed.
func TestPagerRefuses(t *testing.T) {
	g := &Gateway{}
	attempts := cursor{listAttempts, attemptKey(wire.AttemptRow{AttemptID: "a", GuaranteeID: "g", Resource: "r"})}.String()
	for _, c := range []struct {
		limit  int
		cursor string
	}{{-1, ""}, {wire.MaxPageLimit + 1, ""}, {0, "junk"}, {0, attempts}} {
		if _, r := g.pager(listExposure, c.limit, c.cursor); r == nil || r.Code != wire.CodeRequestMalformed {
			t.Errorf("limit %d cursor %q: %+v", c.limit, c.cursor, r)
		}
	}
	p, r := g.pager(listAttempts, 0, attempts)
	if r != nil || p.limit != wire.DefaultPageLimit || p.budget != (1<<20)/2-replyFrame || !slices.Equal(p.after, []string{"a", "g", "r", ""}) {
		t.Fatalf("%+v %+v", p, r)
	}
}

// parseNum reads a number key part.
func parseNum(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
