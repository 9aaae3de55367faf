package client

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/contextos/ledger/wire"
)

type (
	// ImportRow is one row of prior exposure (guarantee-import).
	ImportRow = wire.ImportRow
	// ImportResult is what guarantee-import did with one row.
	ImportResult = wire.ImportResult
	// OutcomeRow is one guarantee's outcomes in one window (report).
	OutcomeRow = wire.OutcomeRow
)

// ImportExposure records exposure committed before adoption, at most
// wire.MaxImportRows rows; each row's result says whether it was imported,
// was already imported, or why it was refused.
func (c *Client) ImportExposure(ctx context.Context, rows []ImportRow) ([]ImportResult, error) {
	var r wire.OpReply
	err := c.Op(ctx, wire.VerbGuaranteeImport, wire.ImportRequest{Rows: rows}, &r)
	return r.Imports, err
}

// Report returns the outcomes per guarantee and window, of one guarantee
// or of all ("").
func (c *Client) Report(ctx context.Context, guaranteeID string) ([]OutcomeRow, error) {
	var r wire.OpReply
	err := c.Op(ctx, wire.VerbReport, wire.ReportRequest{GuaranteeID: guaranteeID}, &r)
	return r.Outcomes, err
}

// importColumns are the columns of an import file, by name.
var importColumns = []string{"guarantee", "resource", "window", "amount", "reference"}

// ImportFile is a parsed import file: the rows to send, the line (CSV) or
// index (JSON, from 1) of each in the file, and the rows refused before
// sending, their Row the file's.
type ImportFile struct {
	Rows    []ImportRow
	Lines   []int
	Refused []ImportResult
}

// ParseImportFile reads an import file of at most wire.MaxImportFileBytes
// bytes and wire.MaxImportRows rows: a JSON array of rows (the members of
// wire.ImportRow, unknown members refused), or CSV with a header naming the
// columns guarantee, resource, window (may be omitted), amount and
// reference, in any order (UTF-8). A row with a malformed amount is refused with
// its code and the others are kept; a malformed file is an error.
func ParseImportFile(b []byte) (ImportFile, error) {
	if len(b) > wire.MaxImportFileBytes {
		return ImportFile{}, fmt.Errorf("import file has %d bytes, more than %d; split it", len(b), wire.MaxImportFileBytes)
	}
	if !utf8.Valid(b) {
		return ImportFile{}, errors.New("import file is not UTF-8")
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return parseImportJSON(b)
	}
	return parseImportCSV(b)
}

func parseImportJSON(b []byte) (ImportFile, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var raw []struct {
		GuaranteeID string      `json:"guarantee_id"`
		Resource    string      `json:"resource"`
		Window      string      `json:"window"`
		Amount      json.Number `json:"amount"`
		Reference   string      `json:"reference"`
	}
	if err := dec.Decode(&raw); err != nil {
		return ImportFile{}, fmt.Errorf("import file: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ImportFile{}, errors.New("import file: data after the array")
	}
	if len(raw) > wire.MaxImportRows {
		return ImportFile{}, fmt.Errorf("import file has %d rows, more than %d; split it", len(raw), wire.MaxImportRows)
	}
	var f ImportFile
	for i, r := range raw {
		f.add(i+1, r.GuaranteeID, r.Resource, r.Window, string(r.Amount), r.Reference)
	}
	return f, f.check()
}

func parseImportCSV(b []byte) (ImportFile, error) {
	rd := csv.NewReader(bytes.NewReader(b))
	rd.FieldsPerRecord = 0
	rd.ReuseRecord = true
	head, err := rd.Read()
	if err != nil {
		return ImportFile{}, fmt.Errorf("import file: no CSV header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		h = strings.TrimSpace(strings.ToLower(h))
		if _, dup := col[h]; dup {
			return ImportFile{}, fmt.Errorf("import file: column %q twice", h)
		}
		col[h] = i
	}
	for _, c := range importColumns {
		if _, ok := col[c]; !ok && c != "window" {
			return ImportFile{}, fmt.Errorf("import file: the header needs the columns %s (window may be omitted)", strings.Join(importColumns, ","))
		}
	}
	if len(col) != len(importColumns) && !(len(col) == len(importColumns)-1 && !hasKey(col, "window")) {
		return ImportFile{}, fmt.Errorf("import file: the header has columns other than %s", strings.Join(importColumns, ","))
	}
	field := func(rec []string, name string) string {
		if i, ok := col[name]; ok {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	var f ImportFile
	for n := 1; ; n++ {
		rec, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ImportFile{}, fmt.Errorf("import file: %w", err)
		}
		if n > wire.MaxImportRows {
			return ImportFile{}, fmt.Errorf("import file has more than %d rows; split it", wire.MaxImportRows)
		}
		line, _ := rd.FieldPos(0)
		f.add(line, field(rec, "guarantee"), field(rec, "resource"), field(rec, "window"), field(rec, "amount"), field(rec, "reference"))
	}
	return f, f.check()
}

func hasKey(m map[string]int, k string) bool { _, ok := m[k]; return ok }

// add keeps a row, or refuses it when its amount is not an exact integer
// in 1..2^53-1 (the kernel's rule for amounts, which refuses any other row
// the file may carry with its own code).
func (f *ImportFile) add(line int, guarantee, resource, window, amount, reference string) {
	n, err := strconv.ParseInt(amount, 10, 64)
	if err != nil || n <= 0 || n > 1<<53-1 || strconv.FormatInt(n, 10) != amount {
		f.Refused = append(f.Refused, ImportResult{Row: line, Reference: reference, Status: wire.ImportRefused,
			Code: wire.CodeAmountInvalid, Reason: fmt.Sprintf("amount %q must be an exact integer in 1..2^53-1", amount)})
		return
	}
	f.Rows = append(f.Rows, ImportRow{GuaranteeID: guarantee, Resource: resource, Window: window, Amount: n, Reference: reference})
	f.Lines = append(f.Lines, line)
}

func (f *ImportFile) check() error {
	if len(f.Rows)+len(f.Refused) == 0 {
		return errors.New("import file has no rows")
	}
	return nil
}
