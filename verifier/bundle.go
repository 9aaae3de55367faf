package verifier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"golang.org/x/mod/sumdb/tlog"
)

// BundleVersion is the version of the bundle.json format.
const BundleVersion = 1

// MaxBundleRecords bounds the records of one bundle (an attempt's events
// and its operation's).
const MaxBundleRecords = 256

// Bundle proves one attempt (a settlement) to a third party in one file:
// the audit records of every event of the attempt and of its operation,
// each with its inclusion proof in one signed checkpoint that carries the
// witnesses' cosignatures, and the log's public keys (keys.json). Its file
// form, bundle.json, is one canonical (JCS) object and a newline:
//
//	{"attempt_id":"…","checkpoint":"<signed note>","keys":"<keys.json>",
//	 "records":[{"index":N,"proof":["<base64 hash>",…],"record":{…}},…],"tenant":"acme","v":1}
//
// The keys travel for convenience: under a witness policy (VerifyBundle
// with witnesses the auditor trusts) the witnesses' cosignatures vouch for
// the checkpoint, whichever log key signed it; an auditor who pins the
// runtime's keys too passes their own.
type Bundle struct {
	Tenant     string
	AttemptID  string
	Checkpoint []byte
	Keys       []byte // keys.json, as the log published it
	Records    []BundleRecord
}

// BundleRecord is one record of a bundle with its inclusion proof.
type BundleRecord struct {
	Index  int64
	Record []byte
	Proof  tlog.RecordProof
}

type bundleFile struct {
	V          int                `json:"v"`
	Tenant     string             `json:"tenant"`
	AttemptID  string             `json:"attempt_id"`
	Checkpoint string             `json:"checkpoint"`
	Keys       string             `json:"keys"`
	Records    []bundleRecordFile `json:"records"`
}

type bundleRecordFile struct {
	Index  int64           `json:"index"`
	Record json.RawMessage `json:"record"`
	Proof  []string        `json:"proof"`
}

// MarshalBundle returns the bundle.json form of b.
func MarshalBundle(b Bundle) ([]byte, error) {
	f := bundleFile{V: BundleVersion, Tenant: b.Tenant, AttemptID: b.AttemptID, Checkpoint: string(b.Checkpoint), Keys: string(b.Keys),
		Records: []bundleRecordFile{}}
	for _, r := range b.Records {
		f.Records = append(f.Records, bundleRecordFile{Index: r.Index, Record: r.Record, Proof: audit.FormatHashes(r.Proof)})
	}
	return audit.CanonicalLine(f)
}

// ParseBundle parses bundle.json strictly: nothing unknown or missing, at
// most MaxBundleRecords records, valid hashes, and the file equal to
// MarshalBundle of the result. It does not verify the bundle.
func ParseBundle(b []byte) (Bundle, error) {
	if len(b) > MaxBundleRecords*(audit.MaxRecordSize+4096)+64*1024 {
		return Bundle{}, errors.New("verifier: bundle: file too large")
	}
	var f struct {
		V          *int               `json:"v"`
		Tenant     *string            `json:"tenant"`
		AttemptID  *string            `json:"attempt_id"`
		Checkpoint *string            `json:"checkpoint"`
		Keys       *string            `json:"keys"`
		Records    []bundleRecordFile `json:"records"`
	}
	if err := kernel.StrictJSON(b, &f); err != nil {
		return Bundle{}, fmt.Errorf("verifier: bundle: %w", err)
	}
	if f.V == nil || *f.V != BundleVersion {
		return Bundle{}, fmt.Errorf("verifier: bundle: want \"v\": %d", BundleVersion)
	}
	if f.Tenant == nil || f.AttemptID == nil || f.Checkpoint == nil || f.Keys == nil || f.Records == nil {
		return Bundle{}, errors.New("verifier: bundle: a field is missing")
	}
	if len(f.Records) == 0 || len(f.Records) > MaxBundleRecords {
		return Bundle{}, fmt.Errorf("verifier: bundle: 1 to %d records, not %d", MaxBundleRecords, len(f.Records))
	}
	out := Bundle{Tenant: *f.Tenant, AttemptID: *f.AttemptID, Checkpoint: []byte(*f.Checkpoint), Keys: []byte(*f.Keys)}
	for _, r := range f.Records {
		if r.Record == nil || r.Proof == nil || len(r.Proof) > 64 {
			return Bundle{}, errors.New("verifier: bundle: a record lacks its proof or has more than 64 hashes")
		}
		hs, err := audit.ParseHashes(r.Proof)
		if err != nil {
			return Bundle{}, fmt.Errorf("verifier: bundle: %w", err)
		}
		out.Records = append(out.Records, BundleRecord{Index: r.Index, Record: r.Record, Proof: hs})
	}
	again, err := MarshalBundle(out)
	if err != nil {
		return Bundle{}, fmt.Errorf("verifier: bundle: %w", err)
	}
	if !bytes.Equal(again, b) {
		return Bundle{}, errors.New("verifier: bundle: not canonical")
	}
	return out, nil
}

// attemptOf reports whether an event names the attempt, and the subject's
// kind.
func attemptOf(env codec.Envelope, attemptID string) bool {
	var body struct {
		AttemptID string `json:"attempt_id"`
	}
	return json.Unmarshal(env.Body, &body) == nil && body.AttemptID == attemptID
}

// NewBundle makes the bundle of an attempt from an export and its keys:
// every record whose event names the attempt, and every record of the
// operation subject that holds it (opening, decision records), proven
// against the export's newest checkpoint (which carries the witnesses'
// cosignatures the log has). The export is not verified here.
func NewBundle(e audit.Entries, keysJSON []byte, attemptID string) (Bundle, error) {
	if attemptID == "" {
		return Bundle{}, errors.New("verifier: bundle: no attempt id")
	}
	var t audit.Tree
	subjects := map[string]bool{}
	var want []int64
	recs := make([]audit.Record, len(e.Records))
	for i, raw := range e.Records {
		if err := t.Append(audit.RecordHash(raw)); err != nil {
			return Bundle{}, err
		}
		r, env, err := audit.Parse(raw)
		if err != nil {
			return Bundle{}, fmt.Errorf("verifier: record %d: %w", i, err)
		}
		recs[i] = r
		if attemptOf(env, attemptID) {
			want = append(want, int64(i))
			if kind, ok := subjectKind(r.Subject); ok && kind == "operation" {
				subjects[r.Subject] = true
			}
		}
	}
	if len(want) == 0 {
		return Bundle{}, ErrNotFound
	}
	want = want[:0]
	for i, r := range recs {
		_, env, _ := audit.Parse(e.Records[i])
		if subjects[r.Subject] || attemptOf(env, attemptID) {
			want = append(want, int64(i))
		}
	}
	if len(want) > MaxBundleRecords {
		return Bundle{}, fmt.Errorf("verifier: bundle: the attempt has %d records, more than %d", len(want), MaxBundleRecords)
	}
	var best []byte
	var bestSize int64
	for _, msg := range e.Checkpoints {
		c, err := audit.ReadCheckpoint(msg)
		if err != nil {
			return Bundle{}, err
		}
		if c.Size <= t.Size() && c.Size > bestSize {
			best, bestSize = msg, c.Size
		}
	}
	if best == nil || want[len(want)-1] >= bestSize {
		return Bundle{}, ErrNotCheckpointed
	}
	b := Bundle{Tenant: e.Tenant, AttemptID: attemptID, Checkpoint: best, Keys: keysJSON}
	for _, i := range want {
		p, err := t.Prove(i, bestSize)
		if err != nil {
			return Bundle{}, err
		}
		b.Records = append(b.Records, BundleRecord{Index: i, Record: e.Records[i], Proof: p})
	}
	return b, nil
}

// subjectKind returns the kind token of an event subject
// (ctx.ev.<tenant>.<kind>...).
func subjectKind(subject string) (string, bool) {
	parts := bytes.SplitN([]byte(subject), []byte("."), 5)
	if len(parts) < 4 {
		return "", false
	}
	return string(parts[3]), true
}

// BundleResult is what VerifyBundle established.
type BundleResult struct {
	Bundle     Bundle
	Checkpoint audit.Checkpoint
	Cosigned   []string // the trusted witnesses that cosigned the checkpoint
	Events     []codec.Envelope
}

// VerifyBundle checks a bundle offline: its checkpoint's signature (by a
// checkpoint key of keys) and every cosignature it carries, each record on
// its own (form, its event's signature by keys' keyring), of the bundle's
// tenant, naming the attempt or on the operation subject of a record that
// does, and included in the checkpoint (tlog.CheckRecord); then the policy:
// at least quorum of witnesses cosigned the checkpoint. keys are the
// bundle's own unless the auditor passes theirs. Errors are *audit.Failure
// (Index the record's, or -1), or a parse error.
func VerifyBundle(b []byte, keys *audit.Keys, witnesses []*audit.Cosigner, quorum int) (BundleResult, error) {
	bd, err := ParseBundle(b)
	if err != nil {
		return BundleResult{}, err
	}
	res := BundleResult{Bundle: bd}
	fail := func(index int64, reason audit.Reason, format string, args ...any) (BundleResult, error) {
		return res, &audit.Failure{Index: index, Checkpoint: -1, Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	k := keys
	if k == nil {
		own, err := audit.ParseKeys(bd.Keys)
		if err != nil {
			return fail(-1, audit.ReasonNonCanonical, "the bundle's keys: %v", err)
		}
		k = &own
	}
	verifiers, err := k.Verifiers()
	if err != nil {
		return BundleResult{}, err
	}
	cosigners, err := k.Cosigners()
	if err != nil {
		return BundleResult{}, err
	}
	known := map[string]bool{}
	for _, c := range cosigners {
		known[c.VerifierKey()] = true
	}
	for _, w := range witnesses {
		if !known[w.VerifierKey()] {
			cosigners = append(cosigners, w)
		}
	}
	o, err := audit.OpenCheckpoint(bd.Checkpoint, verifiers, cosigners)
	if err != nil {
		f := audit.FailureOf(err)
		return fail(-1, f.Reason, "checkpoint: %s", f.Detail)
	}
	res.Checkpoint = o.Checkpoint
	if o.Checkpoint.Origin != audit.Origin(bd.Tenant) {
		return fail(-1, audit.ReasonHashBreak, "checkpoint of %q, bundle of tenant %q", o.Checkpoint.Origin, bd.Tenant)
	}
	subjects := map[string]bool{}
	var on [][2]string // (subject, index) of records that do not name the attempt
	last := int64(-1)
	for _, r := range bd.Records {
		rec, env, err := audit.VerifyRecord(r.Record, k.Keyring)
		if err != nil {
			f := audit.FailureOf(err)
			return fail(r.Index, f.Reason, "%s", f.Detail)
		}
		switch {
		case rec.Tenant != bd.Tenant || rec.Index != r.Index:
			return fail(r.Index, audit.ReasonHashBreak, "record %d of %q in a bundle of record %d of %q", rec.Index, rec.Tenant, r.Index, bd.Tenant)
		case r.Index <= last:
			return fail(r.Index, audit.ReasonReorder, "records out of index order")
		case r.Index >= o.Checkpoint.Size:
			return fail(r.Index, audit.ReasonGap, "checkpoint of size %d does not cover record %d", o.Checkpoint.Size, r.Index)
		}
		last = r.Index
		if err := tlog.CheckRecord(r.Proof, o.Checkpoint.Size, o.Checkpoint.Root, r.Index, audit.RecordHash(r.Record)); err != nil {
			return fail(r.Index, audit.ReasonHashBreak, "inclusion proof: %v", err)
		}
		if attemptOf(env, bd.AttemptID) {
			if kind, ok := subjectKind(rec.Subject); ok && kind == "operation" {
				subjects[rec.Subject] = true
			}
		} else {
			on = append(on, [2]string{rec.Subject, fmt.Sprint(r.Index)})
		}
		res.Events = append(res.Events, env)
	}
	if len(subjects) == 0 && len(on) == len(bd.Records) {
		return fail(-1, audit.ReasonHashBreak, "no record names attempt %s", bd.AttemptID)
	}
	for _, x := range on {
		if !subjects[x[0]] {
			return fail(-1, audit.ReasonHashBreak, "record %s neither names attempt %s nor is on its operation's subject", x[1], bd.AttemptID)
		}
	}
	trusted := map[string]bool{}
	for _, w := range witnesses {
		trusted[w.Name()] = true
	}
	for _, c := range o.Cosigned {
		if trusted[c.Name] {
			res.Cosigned = append(res.Cosigned, c.Name)
		}
	}
	if len(res.Cosigned) < quorum {
		return res, &audit.Failure{Index: -1, Checkpoint: -1, Reason: audit.ReasonWitness,
			Detail: fmt.Sprintf("the checkpoint is cosigned by %d of the trusted witnesses, %d required", len(res.Cosigned), quorum)}
	}
	return res, nil
}
