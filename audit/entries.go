package audit

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// EntriesVersion is the version of the entries.json format.
const EntriesVersion = 1

// Entries is an export of one tenant's audit log: every record from index 0,
// in order, and the signed checkpoints covering them. Its file form,
// entries.json, is written by MarshalEntries with one canonical record per
// line:
//
//	{"v":1,"tenant":"acme","records":[
//	<record 0>,
//	<record 1>
//	],"checkpoints":[
//	"<signed checkpoint note, as a JSON string>"
//	]}
//
// and nothing else is accepted (ParseEntries).
type Entries struct {
	Tenant      string
	Records     [][]byte // canonical records, index order
	Checkpoints [][]byte // signed checkpoint notes, increasing size
}

// MarshalEntries returns the entries.json form of e. It writes records and
// checkpoints as given; it does not verify them.
func MarshalEntries(e Entries) ([]byte, error) {
	tenant, err := kernel.Canonical(e.Tenant)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	n := 64 + len(tenant)
	for _, r := range e.Records {
		n += len(r) + 2
	}
	for _, c := range e.Checkpoints {
		n += 2*len(c) + 4 // room for the escapes of a JSON string
	}
	b.Grow(n)
	fmt.Fprintf(&b, `{"v":%d,"tenant":%s,"records":[`, EntriesVersion, tenant)
	for i, r := range e.Records {
		b.WriteByte('\n')
		b.Write(r)
		if i < len(e.Records)-1 {
			b.WriteByte(',')
		}
	}
	b.WriteString("\n],\"checkpoints\":[")
	for i, c := range e.Checkpoints {
		s, err := kernel.Canonical(string(c))
		if err != nil {
			return nil, err
		}
		b.WriteByte('\n')
		b.Write(s)
		if i < len(e.Checkpoints)-1 {
			b.WriteByte(',')
		}
	}
	b.WriteString("\n]}\n")
	return b.Bytes(), nil
}

// maxEntriesSize bounds what ParseEntries reads (1 GiB).
const maxEntriesSize = 1 << 30

// ParseEntries parses entries.json by its layout: the header line with
// version 1 and a valid tenant, one record per line (each but the last
// followed by a comma), the separator line, one checkpoint (a JSON string)
// per line, the closing line; and the whole file equal to MarshalEntries of
// the result. Records are returned as found, unparsed and unverified (see
// VerifyEntries): a record whose bytes are not even JSON still has its
// line, so the verifier names its index.
func ParseEntries(b []byte) (Entries, error) {
	if len(b) > maxEntriesSize {
		return Entries{}, errors.New("audit: entries: file too large")
	}
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) < 4 || len(lines[len(lines)-1]) != 0 {
		return Entries{}, errors.New("audit: entries: not in the layout of an export (too short, or no final newline)")
	}
	lines = lines[:len(lines)-1]
	head := fmt.Sprintf(`{"v":%d,"tenant":`, EntriesVersion)
	h := lines[0]
	if !bytes.HasPrefix(h, []byte(head)) || !bytes.HasSuffix(h, []byte(`,"records":[`)) || len(h) < len(head)+len(`,"records":[`) {
		return Entries{}, fmt.Errorf("audit: entries: the first line is not %s<tenant>,\"records\":[", head)
	}
	var tenant string
	if err := kernel.StrictJSON(h[len(head):len(h)-len(`,"records":[`)], &tenant); err != nil {
		return Entries{}, fmt.Errorf("audit: entries: tenant: %w", err)
	}
	if err := codec.ValidToken(tenant); err != nil {
		return Entries{}, fmt.Errorf("audit: entries: tenant: %w", err)
	}
	e := Entries{Tenant: tenant, Records: [][]byte{}, Checkpoints: [][]byte{}}
	i := 1
	// list returns the lines up to end, each but the last without its
	// comma; bad is the first line whose comma is missing or extra.
	list := func(end string) (out [][]byte, bad int) {
		bad = -1
		start := i
		for ; i < len(lines) && string(lines[i]) != end; i++ {
		}
		for j, l := range lines[start:i] {
			last := start+j == i-1
			if bytes.HasSuffix(l, []byte(",")) == last && bad < 0 {
				bad = j
			}
			if !last {
				l = bytes.TrimSuffix(l, []byte(","))
			}
			out = append(out, l)
		}
		i++
		return out, bad
	}
	recs, bad := list(`],"checkpoints":[`)
	if bad >= 0 {
		return Entries{}, &Failure{Index: int64(bad), Checkpoint: -1, Reason: ReasonNonCanonical,
			Detail: "the record's line does not end as the layout of an export says (a comma after every record but the last)"}
	}
	e.Records = append(e.Records, recs...)
	cps, bad := list(`]}`)
	if bad >= 0 {
		return Entries{}, &Failure{Index: -1, Checkpoint: bad, Reason: ReasonNonCanonical,
			Detail: "the checkpoint's line does not end as the layout of an export says"}
	}
	for _, c := range cps {
		var s string
		if err := kernel.StrictJSON(c, &s); err != nil {
			return Entries{}, fmt.Errorf("audit: entries: checkpoint %d: %w", len(e.Checkpoints), err)
		}
		e.Checkpoints = append(e.Checkpoints, []byte(s))
	}
	if i != len(lines) {
		return Entries{}, errors.New("audit: entries: not in the layout of an export (lines after the end)")
	}
	again, err := MarshalEntries(e)
	if err != nil {
		return Entries{}, fmt.Errorf("audit: entries: %w", err)
	}
	if !bytes.Equal(again, b) {
		return Entries{}, errors.New("audit: entries: not in the layout of an export (whitespace, commas, field order or escaping differ)")
	}
	return e, nil
}
