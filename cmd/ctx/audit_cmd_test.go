package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events/codec"
)

// runStdout runs ctx with args and returns its exit code and what it
// printed on stdout.
func runStdout(t *testing.T, args ...string) (int, []byte) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = f
	code := run(args)
	os.Stdout = saved
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	return code, b.Bytes()
}

// vectorExpectation is a line of testdata/verifier/expected.json.
type vectorExpectation struct {
	File       string `json:"file"`
	Kind       string `json:"kind"`
	Keys       string `json:"keys"`
	MinSize    int64  `json:"min_size"`
	Quorum     int    `json:"quorum"`
	Want       string `json:"want"`
	Index      int64  `json:"index"`
	Checkpoint int    `json:"checkpoint"`
}

// TestAuditVerifyVectors runs ctx audit-verify --json on every golden export
// with its policy: exit 0 for "ok", exit 1 otherwise with the structured
// result naming the reason, the record index and the checkpoint.
func TestAuditVerifyVectors(t *testing.T) {
	vec := func(name string) string { return filepath.Join("../../testdata/verifier", name) }
	var exps []vectorExpectation
	if err := json.Unmarshal(mustReadFile(t, vec("expected.json")), &exps); err != nil {
		t.Fatal(err)
	}
	keys, err := audit.ParseKeys(mustReadFile(t, vec("keys.json")))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range exps {
		if e.Kind != "entries" {
			continue
		}
		n++
		args := []string{"audit-verify", "--entries", vec(e.File), "--keys", vec(e.Keys), "--json"}
		if e.MinSize > 0 {
			args = append(args, "--min-size", strings.TrimSpace(string(mustJSON(t, e.MinSize))))
		}
		if e.Quorum > 0 {
			for _, k := range keys.WitnessKeys {
				args = append(args, "--witness-key", k)
			}
			args = append(args, "--witnesses", strings.TrimSpace(string(mustJSON(t, e.Quorum))))
		}
		code, out := runStdout(t, args...)
		var res auditResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%s: --json printed %q: %v", e.File, out, err)
		}
		if e.Want == "ok" {
			if code != 0 || !res.OK || res.Covered != res.Records {
				t.Errorf("%s: exit %d %+v, want ok", e.File, code, res)
			}
			if e.Quorum > 0 && len(res.Cosigned) < e.Quorum {
				t.Errorf("%s: cosigned by %v", e.File, res.Cosigned)
			}
			continue
		}
		idx, cp := int64(-1), 0
		if res.Index != nil {
			idx = *res.Index
		}
		if res.Checkpoint != nil {
			cp = *res.Checkpoint + 1
		}
		if code != 1 || res.OK || res.Reason != e.Want || idx != e.Index || cp != e.Checkpoint {
			t.Errorf("%s: exit %d, %s at index %d checkpoint %d; want exit 1, %s at %d checkpoint %d", e.File, code, res.Reason, idx, cp, e.Want, e.Index, e.Checkpoint)
		}
	}
	if n < 15 {
		t.Fatalf("only %d export vectors", n)
	}
}

// TestAuditVerifyNamesBrokenRecord: one byte that breaks a record's JSON
// (a quote removed, a brace changed, a newline inserted) is refused naming
// that record's index, in the text and in --json.
func TestAuditVerifyNamesBrokenRecord(t *testing.T) {
	vec := func(name string) string { return filepath.Join("../../testdata/verifier", name) }
	good := mustReadFile(t, vec("ok.entries.json"))
	e, err := audit.ParseEntries(good)
	if err != nil {
		t.Fatal(err)
	}
	rec := e.Records[7]
	start := bytes.Index(good, rec)
	for _, change := range []struct {
		at int
		to byte
	}{{1, '!'}, {0, '['}, {len(rec) - 1, ']'}, {len(rec) / 2, '\n'}, {bytes.IndexByte(rec, ':'), ','}, {len(rec), ' '}} {
		b := bytes.Clone(good)
		b[start+change.at] = change.to
		path := filepath.Join(t.TempDir(), "entries.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := runStdout(t, "audit-verify", "--entries", path, "--keys", vec("keys.json"), "--json")
		var res auditResult
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("byte %d -> %q: --json printed %q: %v", change.at, change.to, out, err)
		}
		if code != 1 || res.Index == nil || *res.Index != 7 {
			t.Fatalf("byte %d -> %q: exit %d, %+v; want record 7 named", change.at, change.to, code, res)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAuditKeysFromKeyFile: ctx audit keys --from-key prints the keys.json a
// daemon with that key publishes, and nothing of the private key.
func TestAuditKeysFromKeyFile(t *testing.T) {
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "runtime.key")
	key, err := codec.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := codec.SavePrivateKey(keyPath, key); err != nil {
		t.Fatal(err)
	}
	code, out := runStdout(t, "audit", "keys", "--from-key", keyPath, "--tenant", "acme")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	want, err := audit.KeysFor("acme", key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := audit.MarshalKeys(want)
	if !bytes.Equal(out, wantJSON) {
		t.Fatalf("printed %s, want %s", out, wantJSON)
	}
	if bytes.Contains(out, []byte(base64.StdEncoding.EncodeToString(key.Seed()))) {
		t.Fatal("the seed was printed")
	}
	if c := run([]string{"audit", "keys", "--tenant", "acme"}); c != 2 {
		t.Fatalf("without --from-key: exit %d, want 2", c)
	}
}

// TestAuditVerifyKept: --kept takes a checkpoint note the auditor kept; the
// export must extend it.
func TestAuditVerifyKept(t *testing.T) {
	vec := func(name string) string { return filepath.Join("../../testdata/verifier", name) }
	e, err := audit.ParseEntries(mustReadFile(t, vec("ok.entries.json")))
	if err != nil {
		t.Fatal(err)
	}
	c, err := audit.ParseConsistency(mustReadFile(t, vec("consistency-fork.json")))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kept, fork := write("kept.note", e.Checkpoints[0]), write("fork.note", c.Old)
	short := write("short.json", mustMarshal(t, audit.Entries{Tenant: e.Tenant, Records: e.Records[:4], Checkpoints: [][]byte{}}))
	for _, tc := range []struct {
		entries, kept string
		code          int
		reason        string
	}{
		{vec("ok.entries.json"), kept, 0, ""},
		{vec("ok.entries.json"), fork, 1, "hash-break"},
		{short, kept, 1, "truncated"}, // four records, the kept checkpoint covers five
	} {
		code, out := runStdout(t, "audit-verify", "--entries", tc.entries, "--keys", vec("keys.json"), "--kept", tc.kept, "--allow-partial", "--json")
		var res auditResult
		if err := json.Unmarshal(out, &res); err != nil || code != tc.code || res.Reason != tc.reason {
			t.Errorf("%s --kept %s: exit %d, %+v (%v); want %d %q", tc.entries, tc.kept, code, res, err, tc.code, tc.reason)
		}
	}
}

func mustMarshal(t *testing.T, e audit.Entries) []byte {
	t.Helper()
	b, err := audit.MarshalEntries(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
