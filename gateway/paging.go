package gateway

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/wire"
)

// Paging of the list verbs (exposure, attempts, approvals, incidents,
// guarantee-history). A request names limit (rows per page, 0 or absent:
// DefaultPageLimit, at most MaxPageLimit) and cursor (absent: the first
// page; else the next_cursor of the page before). A reply carries
// next_cursor when rows remain. Each list is in the order of a key that
// only grows with new rows or sorts them in place (an attempt id, a
// guarantee and resource, a stream sequence, a version), and a cursor is
// the key of the last row its page held: rows added or removed between
// pages never make a later page repeat or skip a row that was there
// throughout. A page also stops before its encoding passes the reply
// budget (half the server's max_payload, at most MaxReplyBudget).
const (

	// replyFrame is what a page keeps free for the reply around its rows
	// (ok, next_cursor).
	replyFrame = 2 << 10
)

// The lists, the first letter of a cursor.
const (
	listExposure  = 'e'
	listAttempts  = 'a'
	listApprovals = 'p'
	listIncidents = 'i'
	listVersions  = 'v'
	listDecisions = 'd'
)

// cursorParts are the kinds of each list's key parts: s a string of at
// most ShortenAbove bytes, d a digest or empty, n a number.
var cursorParts = map[byte]string{
	listExposure:  "ssd",  // guarantee, resource (its first ShortenAbove bytes), digest of a longer one
	listAttempts:  "sssd", // attempt id, then the exposure key
	listApprovals: "n",    // stream sequence of the request
	listIncidents: "nn",   // IncidentKey
	listVersions:  "n",    // version
	listDecisions: "n",    // stream sequence of the record
}

// cursor is a position in a list: the list and the key of the last row a
// page held. Its text, opaque to clients, is the list's letter, then each
// key part in unpadded base64url, dot-separated.
type cursor struct {
	list byte
	key  []string
}

var b64 = base64.RawURLEncoding.Strict()

// String is the cursor's text.
func (c cursor) String() string {
	var b strings.Builder
	b.WriteByte(c.list)
	for _, p := range c.key {
		b.WriteByte('.')
		b.WriteString(b64.EncodeToString([]byte(p)))
	}
	return b.String()
}

// errCursor is the refusal of any cursor that is not one this runtime wrote.
var errCursor = errors.New("cursor: not a cursor of this list (send next_cursor as it came)")

// parseCursor reads a cursor's text. It accepts exactly the texts String
// writes for a valid key: any other is an error.
func parseCursor(s string) (cursor, error) {
	if len(s) < 1 || len(s) > wire.MaxCursorBytes {
		return cursor{}, errCursor
	}
	kinds, ok := cursorParts[s[0]]
	if !ok {
		return cursor{}, errCursor
	}
	tok := strings.Split(s[1:], ".")
	if tok[0] != "" || len(tok)-1 != len(kinds) {
		return cursor{}, errCursor
	}
	c := cursor{list: s[0], key: make([]string, len(kinds))}
	for i, t := range tok[1:] {
		b, err := b64.DecodeString(t)
		if err != nil || b64.EncodeToString(b) != t {
			return cursor{}, errCursor
		}
		p := string(b)
		switch kinds[i] {
		case 's':
			ok = len(p) <= wire.ShortenAbove
		case 'd':
			ok = p == "" || isDigest(p)
		case 'n':
			_, err := strconv.ParseUint(p, 10, 64)
			ok = len(p) == 20 && strings.Trim(p, "0123456789") == "" && err == nil
		}
		if !ok {
			return cursor{}, errCursor
		}
		c.key[i] = p
	}
	return c, nil
}

// isDigest reports whether s is a Digest (kernel.IsDigest).
func isDigest(s string) bool {
	return kernel.IsDigest(s)
}

// num is a key part that sorts like the number.
func num(n uint64) string { return fmt.Sprintf("%020d", n) }

// resourceKey is the key of a resource: its first ShortenAbove bytes and,
// for a longer one, its digest (the model's ResourceDigest when it set
// one). For every id of at most ShortenAbove bytes this is the order of
// the ids themselves.
func resourceKey(resource, digest string) (string, string) {
	if len(resource) <= wire.ShortenAbove {
		return resource, ""
	}
	if digest == "" {
		digest = wire.Digest(resource)
	}
	return resource[:wire.ShortenAbove], digest
}

func exposureKey(r wire.ExposureRow) []string {
	p, d := resourceKey(r.Resource, r.ResourceDigest)
	return []string{r.GuaranteeID, p, d}
}

func attemptKey(r wire.AttemptRow) []string {
	p, d := resourceKey(r.Resource, r.ResourceDigest)
	return []string{r.AttemptID, r.GuaranteeID, p, d}
}

func approvalKey(p wire.PendingApproval) []string { return []string{num(p.Seq)} }

func incidentKey(in wire.Incident) []string { return []string{num(in.Key.Seq), num(in.Key.N)} }

func decisionKey(d wire.DecisionRow) []string { return []string{num(d.Seq)} }

func versionKey(v wire.VersionRow) []string { return []string{num(v.Version)} }

// pager is a page asked for: the list, where it starts and its bounds.
type pager struct {
	list   byte
	after  []string // the cursor's key; nil: the first page
	limit  int
	budget int // bytes for the rows
}

// pager reads a request's limit and cursor for list; a malformed one is
// the reply to send.
func (g *Gateway) pager(list byte, limit int, cur string) (pager, *wire.OpReply) {
	if r := kernel.CheckPageLimit(limit); r != nil {
		return pager{}, &wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	if limit == 0 {
		limit = wire.DefaultPageLimit
	}
	p := pager{list: list, limit: limit, budget: g.replyBudget() - replyFrame}
	if cur != "" {
		c, err := parseCursor(cur)
		if err == nil && c.list != list {
			err = errCursor
		}
		if err != nil {
			r := wire.Refused(wire.CodeRequestMalformed, "%v", err)
			return pager{}, &r
		}
		p.after = c.key
	}
	return p, nil
}

// replyBudget is the most bytes a page's reply may take: half the
// server's max_payload as the serving connection read it, at most
// MaxReplyBudget.
func (g *Gateway) replyBudget() int {
	mp := g.maxPayload.Load()
	if mp <= 0 {
		mp = 1 << 20 // NATS' default
	}
	return int(min(mp/2, wire.MaxReplyBudget))
}

// page returns the page p asks for of rows, each row as show makes it, and
// the next page's cursor ("" when the page ends the list). Rows are put in
// key order first. A page holds at least one row when one remains, so a
// client always moves on; a row too large for the server is then refused
// when its reply is sent (respond).
func page[T any](p pager, rows []T, key func(T) []string, show func(T) T) ([]T, string) {
	type keyed struct {
		key []string
		row T
	}
	ks := make([]keyed, len(rows))
	for i, r := range rows {
		ks[i] = keyed{key(r), r}
	}
	sort.SliceStable(ks, func(i, j int) bool { return slices.Compare(ks[i].key, ks[j].key) < 0 })
	i := 0
	if p.after != nil {
		i = sort.Search(len(ks), func(i int) bool { return slices.Compare(ks[i].key, p.after) > 0 })
	}
	out := make([]T, 0, min(p.limit, len(ks)-i))
	used := 0
	for ; i < len(ks) && len(out) < p.limit; i++ {
		r := show(ks[i].row)
		b, err := json.Marshal(r)
		n := len(b) + 1
		if err == nil && len(out) > 0 && used+n > p.budget {
			break
		}
		used += n
		out = append(out, r)
	}
	if i == len(ks) {
		return out, ""
	}
	return out, cursor{list: p.list, key: ks[i-1].key}.String()
}

// shorten applies wire.Shorten to *s, setting *digest when it
// shortens it; known is the digest when the caller has it.
func shorten(s, digest *string, known string) {
	if len(*s) <= wire.ShortenAbove {
		return
	}
	if known == "" {
		known = wire.Digest(*s)
	}
	*s, *digest = wire.Prefix(*s), known
}

func showExposure(r wire.ExposureRow) wire.ExposureRow {
	shorten(&r.Resource, &r.ResourceDigest, r.ResourceDigest)
	return r
}

func showAttempt(r wire.AttemptRow) wire.AttemptRow {
	shorten(&r.Resource, &r.ResourceDigest, r.ResourceDigest)
	shorten(&r.RunID, &r.RunIDDigest, "")
	shorten(&r.LastReason, &r.LastReasonDigest, "")
	return r
}

func showApproval(p wire.PendingApproval) wire.PendingApproval {
	shorten(&p.OperationKey, &p.OperationKeyDigest, "")
	shorten(&p.RunID, &p.RunIDDigest, "")
	args, changed := wire.ShortenJSON(p.Arguments)
	if changed || len(args) > wire.MaxShownArguments {
		p.ArgumentsDigest = wire.Digest(string(p.Arguments))
		if len(args) > wire.MaxShownArguments {
			p.ArgumentsBytes, args = len(p.Arguments), nil
		}
		p.Arguments = args
	}
	return p
}

func showIncident(in wire.Incident) wire.Incident {
	shorten(&in.Reason, &in.ReasonDigest, "")
	return in
}

func showVersion(v wire.VersionRow) wire.VersionRow {
	shorten(&v.Resource, &v.ResourceDigest, "")
	shorten(&v.Reason, &v.ReasonDigest, "")
	return v
}

func showDecision(d wire.DecisionRow) wire.DecisionRow {
	shorten(&d.Reason, &d.ReasonDigest, "")
	return d
}

func showSettle(s wire.SettleRow) wire.SettleRow {
	shorten(&s.Reason, &s.ReasonDigest, "")
	return s
}

// decodeList reads a list verb's body.
func decodeList(body []byte, verb string) (wire.ListRequest, *wire.OpReply) {
	var req wire.ListRequest
	if err := kernel.DecodeOptionalRequest(body, &req); err != nil {
		r := wire.Refused(wire.CodeRequestMalformed, "request: %v (%s takes {limit?, cursor?})", err, verb)
		return req, &r
	}
	return req, nil
}

// resolveResource returns the resource a request names, by its id or by
// the digest a view showed beside it (resolved through the read model).
func (g *Gateway) resolveResource(tenant, guaranteeID, resource, digest string) (string, *wire.OpReply) {
	if r := kernel.CheckResourceDigest(resource, digest); r != nil {
		return "", &wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	if digest == "" {
		return resource, nil
	}
	res, ok := g.model.ResourceByDigest(tenant, guaranteeID, digest)
	if !ok {
		r := kernel.RefuseUnknownResourceDigest(guaranteeID, digest)
		return "", &wire.OpReply{Code: r.Code, Reason: r.Reason}
	}
	return res, nil
}
