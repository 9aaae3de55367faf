package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/contextos/ledger/wire"
)

// wireVector is a file of testdata/wire (its README says what each member
// means).
type wireVector struct {
	Schema  string          `json:"schema"`
	Status  Status          `json:"status"`
	Code    Code            `json:"code"`
	Retry   wire.Retry      `json:"retry"`
	Verb    string          `json:"verb"`
	Member  string          `json:"member"`
	Rows    int             `json:"rows"`
	Message json.RawMessage `json:"message"`
}

// wireVectors reads every vector of testdata/wire, by its path there.
func wireVectors(t *testing.T) map[string]wireVector {
	t.Helper()
	dir := filepath.Join("..", "testdata", "wire")
	out := map[string]wireVector{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var v wireVector
		if err := strict(b, &v); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no vectors in testdata/wire")
	}
	return out
}

// strict decodes b into v refusing members v does not have, so that a
// member the daemon sends and the client lacks fails the test.
func strict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// sameJSON reports whether a and b are the same JSON value, whatever the
// order of members.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// roundTrip decodes msg strictly into a new T, re-encodes it and checks the
// result is msg.
func roundTrip[T any](t *testing.T, name string, msg []byte) T {
	t.Helper()
	var v T
	if err := strict(msg, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, b, msg) {
		t.Errorf("%s: re-encoded\n%s\nwant\n%s", name, b, msg)
	}
	return v
}

// rowsOf is how many rows an operator reply holds in member.
func rowsOf(r wire.OpReply, member string) int {
	switch member {
	case "exposure":
		return len(r.Exposure)
	case "attempts":
		return len(r.Attempts)
	case "approvals":
		return len(r.Approvals)
	case "incidents":
		return len(r.Incidents)
	case "versions":
		return len(r.Versions)
	case "breakers":
		return len(r.Breakers)
	case "settled":
		return len(r.Settled)
	}
	return -1
}

// TestWireVectors reads every wire vector with the client's own decoding:
// each message round-trips through the client's types, each decision and
// operator reply ends as the client's Propose and Op end it (a Refused of
// the vector's code and retry class, a resend, or the decision), and pages
// carry their rows and cursor.
func TestWireVectors(t *testing.T) {
	codes := map[Code]bool{}
	statuses := map[Status]bool{}
	for name, v := range wireVectors(t) {
		switch v.Schema {
		case "proposal":
			roundTrip[Proposal](t, name, v.Message)
		case "exposure-request":
			roundTrip[OpRequest](t, name, v.Message)
		case "list-request":
			roundTrip[Page](t, name, v.Message)
		case "decision":
			roundTrip[Decision](t, name, v.Message)
			d, final, err := readDecision(v.Message)
			statuses[d.Status] = true
			if d.Status != v.Status {
				t.Errorf("%s: status %s, want %s", name, d.Status, v.Status)
			}
			if g, err := DecisionGate(d); err != nil || (g == nil) != (len(d.Gate) == 0) {
				t.Errorf("%s: gate %v, %v", name, g, err)
			}
			switch {
			case v.Status == StatusUnknown && v.Retry != wire.RetryNever || v.Code == CodeOverloaded:
				codes[v.Code] = true
				if final || err == nil {
					t.Errorf("%s: final %v (%v), want a resend", name, final, err)
				}
			case v.Status == StatusRefused || v.Status == StatusUnknown:
				codes[v.Code] = true
				var r Refused
				if !final || !errors.As(err, &r) || !errors.Is(err, Refused{Code: v.Code}) {
					t.Fatalf("%s: final %v, %v; want Refused %s", name, final, err, v.Code)
				}
				if r.Retry() != v.Retry || r.Decision == nil || r.Decision.Code != v.Code {
					t.Errorf("%s: retry %q decision %v; want retry %q", name, r.Retry(), r.Decision, v.Retry)
				}
			default:
				if !final || err != nil {
					t.Errorf("%s: final %v, %v; want the decision", name, final, err)
				}
			}
		case "op-reply":
			r := roundTrip[wire.OpReply](t, name, v.Message)
			err := readOpReply(v.Verb, v.Message)
			if v.Code != "" {
				var ref Refused
				if !errors.As(err, &ref) || ref.Code != v.Code || ref.Retry() != v.Retry {
					t.Errorf("%s: %v; want Refused %s (%s)", name, err, v.Code, v.Retry)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if v.Member != "" && rowsOf(r, v.Member) != v.Rows {
				t.Errorf("%s: %d rows in %s, want %d", name, rowsOf(r, v.Member), v.Member, v.Rows)
			}
			if strings.HasSuffix(name, "-page.json") != (r.NextCursor != "") {
				t.Errorf("%s: next_cursor %q", name, r.NextCursor)
			}
		default:
			t.Errorf("%s: schema %s the client does not read", name, v.Schema)
		}
	}
	for _, c := range wire.Codes {
		if !codes[c] {
			t.Errorf("no refused decision vector of %s", c)
		}
	}
	for _, s := range []Status{StatusApplied, StatusNotApplied, StatusPending, StatusUnknown, StatusRefused} {
		if !statuses[s] {
			t.Errorf("no decision vector of status %s", s)
		}
	}
}
