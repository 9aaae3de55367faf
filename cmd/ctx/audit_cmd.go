package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"

	"github.com/contextos/ledger/events/codec"
	"github.com/spf13/cobra"
)

func init() {
	register(newAuditCmd)
	register(newAuditVerifyCmd)
	register(newEventsCmd)
	register(func() *cobra.Command { return newExposureExportCmd("exposure-export") })
	exposureSubcommands = append(exposureSubcommands, func() *cobra.Command { return newExposureExportCmd("export") })
}

// auditClient connects with the command's flags and returns an ops client
// that reports progress on stderr when stderr is a terminal.
func auditClient(c *connFlags) (*client.AuditClient, func(), error) {
	nc, err := c.dial()
	if err != nil {
		return nil, nil, err
	}
	oc := &client.AuditClient{NC: nc, Tenant: c.tenant, Operator: c.user, Timeout: c.timeout}
	if auditIsTerminal(os.Stderr) {
		oc.Progress = func(verb string, n int) { fmt.Fprintf(os.Stderr, "\r%s: %d", verb, n) }
	}
	done := func() {
		if oc.Progress != nil {
			fmt.Fprintln(os.Stderr)
		}
		nc.Close()
	}
	return oc, done, nil
}

// auditIsTerminal reports whether f is a character device (a terminal).
func auditIsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// auditOpsError turns a refused ops reply into exit code 1.
func auditOpsError(err error) error {
	var oe *client.AuditError
	if errors.As(err, &oe) {
		return &ExitError{Code: 1, Err: err}
	}
	return err
}

// auditWriteFile writes b to path through a temporary file and a rename, so
// that a reader never sees half an export.
func auditWriteFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func auditReadKeys(path string) (audit.Keys, error) { return readFileAs(path, audit.ParseKeys) }

// readFileAs reads the file at path and parses it; either failure is exit 1,
// a parse error named after the file.
func readFileAs[T any](path string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	b, err := os.ReadFile(path)
	if err != nil {
		return zero, &ExitError{Code: 1, Err: err}
	}
	v, err := parse(b)
	if err != nil {
		return zero, &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", path, err)}
	}
	return v, nil
}

// auditFetch asks contextosd for the file of an audit verb, checks it with
// parse, and writes it to out.
func auditFetch(c *connFlags, verb string, req any, what, out string, parse func([]byte) error) error {
	oc, done, err := auditClient(c)
	if err != nil {
		return err
	}
	defer done()
	b, err := oc.File(context.Background(), verb, req)
	if err != nil {
		return auditOpsError(err)
	}
	if err := parse(b); err != nil {
		return fmt.Errorf("%s from contextosd: %w", what, err)
	}
	return auditWriteFile(out, b)
}

// auditReadKeysAndFile reads the trusted keys (--keys, required) and the
// file to verify offline.
func auditReadKeysAndFile(keysPath, path string) (audit.Keys, []byte, error) {
	if keysPath == "" {
		return audit.Keys{}, nil, usageError("--keys is required")
	}
	keys, err := auditReadKeys(keysPath)
	if err != nil {
		return audit.Keys{}, nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return audit.Keys{}, nil, &ExitError{Code: 1, Err: err}
	}
	return keys, b, nil
}

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Export the signed audit log, prove one event's record, verify a proof",
		Long: `The audit log holds one record per event of the tenant (the signed event), hash-chained and
covered by signed Merkle checkpoints. Export it with "ctx audit export", check it
offline with "ctx audit-verify", prove a single event with "ctx audit prove"
and "ctx audit verify-proof", and show that an older checkpoint is a prefix of
the latest with "ctx audit prove-consistency" and "ctx audit verify-consistency".
See docs/audit.md for the file formats.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAuditExportCmd(), newAuditProveCmd(), newAuditVerifyProofCmd(),
		newAuditProveConsistencyCmd(), newAuditVerifyConsistencyCmd(), newAuditKeysCmd())
	return cmd
}

func newAuditExportCmd() *cobra.Command {
	var out, keysOut string
	var allowPartial bool
	cmd := &cobra.Command{
		Use:   "export --out entries.json",
		Short: "Write the tenant's audit log (records and checkpoints) and the public keys",
		Long: `Fetch every audit record of the tenant from contextosd, page by page, with the
signed checkpoints they cover, and write them to --out (entries.json). The runtime's
public keys go to --keys-out (default keys.json beside --out). The export is verified
against those keys before the command returns; an auditor should verify it again
against keys obtained out of band (ctx audit-verify). Records past the newest
checkpoint are left for the next export unless --allow-partial, so that an
export is complete: every record it holds is committed to by a signed checkpoint.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&out, "out", "", "entries file to write (required)")
	cmd.Flags().StringVar(&keysOut, "keys-out", "", "keys file to write (default: keys.json beside --out)")
	cmd.Flags().BoolVar(&allowPartial, "allow-partial", false, "also write the records past the newest checkpoint (the export then verifies only with --allow-partial)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if out == "" {
			return usageError("--out is required")
		}
		if keysOut == "" {
			keysOut = filepath.Join(filepath.Dir(out), "keys.json")
		}
		oc, done, err := auditClient(c)
		if err != nil {
			return err
		}
		defer done()
		ctx := context.Background()
		keysJSON, err := oc.File(ctx, wire.VerbAuditKeys, nil)
		if err != nil {
			return auditOpsError(err)
		}
		keys, err := audit.ParseKeys(keysJSON)
		if err != nil {
			return fmt.Errorf("keys from contextosd: %w", err)
		}
		entries, err := exportEntries(ctx, oc)
		if err != nil {
			return auditOpsError(err)
		}
		covered := entriesCovered(entries)
		past := int64(len(entries.Records)) - covered
		if !allowPartial {
			// An export holds what a signed checkpoint commits to; the
			// newest records wait for the next checkpoint (and export).
			entries.Records = entries.Records[:covered]
		}
		b, err := audit.MarshalEntries(entries)
		if err != nil {
			return err
		}
		if err := auditWriteFile(out, b); err != nil {
			return err
		}
		if err := auditWriteFile(keysOut, keysJSON); err != nil {
			return err
		}
		res, err := verifier.VerifyEntriesPolicy(b, keys, verifier.Policy{AllowPartial: allowPartial})
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		if c.json {
			if err := printJSON(auditResultJSON(res)); err != nil {
				return err
			}
		} else {
			fmt.Printf("wrote %d records and %d checkpoints to %s, keys to %s\n", res.Records, res.Checkpoints, out, keysOut)
			if past > 0 && !allowPartial {
				fmt.Printf("note: %d newer records are not covered by a checkpoint yet; they are in the next export\n", past)
			}
		}
		if !res.OK() {
			return &ExitError{Code: 1, Err: fmt.Errorf("the export does not verify: %v", res.Failure)}
		}
		return nil
	}
	return cmd
}

// auditResult is the --json form of a verification.
type auditResult struct {
	OK          bool     `json:"ok"`
	Tenant      string   `json:"tenant"`
	Records     int64    `json:"records"`
	Checkpoints int      `json:"checkpoints"`
	Covered     int64    `json:"covered"` // records covered by the newest checkpoint
	Cosigned    []string `json:"cosigned,omitempty"`
	Root        string   `json:"root,omitempty"`
	Index       *int64   `json:"index,omitempty"`
	Checkpoint  *int     `json:"checkpoint,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Detail      string   `json:"detail,omitempty"`
}

func auditResultJSON(res verifier.Result) auditResult {
	r := auditResult{OK: res.OK(), Tenant: res.Tenant, Records: res.Records, Checkpoints: res.Checkpoints, Covered: res.Covered, Cosigned: res.Cosigned}
	if res.OK() {
		r.Root = res.Root.String()
		return r
	}
	f := res.Failure
	if f.Index >= 0 {
		r.Index = &f.Index
	}
	if f.Checkpoint >= 0 {
		r.Checkpoint = &f.Checkpoint
	}
	r.Reason, r.Detail = string(f.Reason), f.Detail
	return r
}

// entriesCovered is the size of the newest checkpoint of an export (read,
// not verified).
func entriesCovered(e audit.Entries) int64 {
	var n int64
	for _, msg := range e.Checkpoints {
		if c, err := audit.ReadCheckpoint(msg); err == nil && c.Size > n && c.Size <= int64(len(e.Records)) {
			n = c.Size
		}
	}
	return n
}

// auditFailureLine is the one-line form of a failure: where, reason, detail.
func auditFailureLine(f *audit.Failure) string {
	where := fmt.Sprintf("first bad index %d", f.Index)
	switch {
	case f.Index < 0 && f.Checkpoint >= 0:
		where = fmt.Sprintf("checkpoint %d", f.Checkpoint)
	case f.Index < 0:
		where = "export"
	case f.Checkpoint >= 0:
		where += fmt.Sprintf(" (checkpoint %d)", f.Checkpoint)
	}
	return fmt.Sprintf("%s: %s: %s", where, f.Reason, f.Detail)
}

func newAuditVerifyCmd() *cobra.Command {
	var entriesPath, keysPath, bundlePath string
	var witnessKeys, keptPaths []string
	var quorum int
	var minSize int64
	var asJSON, allowPartial bool
	cmd := &cobra.Command{
		Use:   "audit-verify (--entries entries.json --keys keys.json | --bundle bundle.json [--keys keys.json]) [--witness-key K --witnesses N] [--min-size N] [--kept NOTE] [--allow-partial]",
		Short: "Verify an exported audit log offline (exit 0 valid, 1 with the first bad index)",
		Long: `Check every record of entries.json in order: canonical form, its event's
signature under a trusted key, the hash chain (prev_hash), index continuity and
order; then every checkpoint's signature, its witnesses' cosignatures and its
Merkle root; then coverage: every record must be covered by a checkpoint
(unless --allow-partial), the export must hold at least --min-size records (a
size you trust, from an earlier export or a witness) and extend every --kept
checkpoint (one you kept, or a witness's latest: same root at its size). With --witness-key
(repeatable, a witness's cosignature verifier key) and --witnesses N, the newest
checkpoint must carry valid cosignatures of at least N of those witnesses: a
log rewritten by whoever holds the runtime key is not cosigned by an honest
witness that saw the earlier one.
Exit 0 when all hold; otherwise exit 1 printing the first bad record index (or
checkpoint) and one reason of: bad-signature, hash-break, gap, reorder,
non-canonical, unknown-key, uncovered, truncated, witness-policy. No network is
used.

With --bundle (ctx audit prove --attempt), check one attempt's bundle: the
checkpoint's signature and cosignatures, each record's form and event
signature, that each names the attempt or is on its operation's subject, and
each record's inclusion proof in the checkpoint; then the witness policy. The
keys are the bundle's own unless --keys is given; under a witness policy the
trusted witnesses' cosignatures vouch for the checkpoint.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&entriesPath, "entries", "", "entries.json to verify")
	cmd.Flags().StringVar(&bundlePath, "bundle", "", "an attempt's bundle.json to verify (instead of --entries)")
	cmd.Flags().StringVar(&keysPath, "keys", "", "trusted keys.json (required with --entries)")
	cmd.Flags().StringArrayVar(&witnessKeys, "witness-key", nil, "a trusted witness's cosignature key (<name>+<hash>+<key>); repeatable")
	cmd.Flags().IntVar(&quorum, "witnesses", 0, "how many of the --witness-key witnesses must have cosigned the newest checkpoint")
	cmd.Flags().Int64Var(&minSize, "min-size", 0, "a size the log is known to have reached: a shorter export is refused")
	cmd.Flags().StringArrayVar(&keptPaths, "kept", nil, "a checkpoint note you kept (or a witness's latest): the export must extend it; repeatable")
	cmd.Flags().BoolVar(&allowPartial, "allow-partial", false, "accept records past the newest checkpoint")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (also when it fails)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if quorum < 0 || quorum > len(witnessKeys) {
			return usageError("--witnesses %d needs at least that many --witness-key", quorum)
		}
		if bundlePath != "" {
			if entriesPath != "" || minSize != 0 || len(keptPaths) > 0 || allowPartial {
				return usageError("--bundle takes --keys, --witness-key, --witnesses and --json only")
			}
			return auditVerifyBundle(bundlePath, keysPath, witnessKeys, quorum, asJSON)
		}
		if entriesPath == "" || keysPath == "" {
			return usageError("--entries and --keys are required")
		}
		if minSize < 0 {
			return usageError("--min-size must be >= 0")
		}
		p := verifier.Policy{AllowPartial: allowPartial, MinSize: minSize, Quorum: quorum}
		for _, k := range witnessKeys {
			w, err := audit.ParseCosignerKey(k)
			if err != nil {
				return usageError("--witness-key: %v", err)
			}
			p.Witnesses = append(p.Witnesses, w)
		}
		for _, k := range keptPaths {
			b, err := os.ReadFile(k)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			p.Kept = append(p.Kept, b)
		}
		keys, err := auditReadKeys(keysPath)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(entriesPath)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		res, err := verifier.VerifyEntriesPolicy(b, keys, p)
		if err != nil {
			// Not an export at all: still a structured result.
			res = verifier.Result{Failure: audit.Fail(audit.ReasonNonCanonical, "%v", err)}
		}
		if asJSON {
			if err := printJSON(auditResultJSON(res)); err != nil {
				return err
			}
		}
		if !res.OK() {
			return &ExitError{Code: 1, Err: fmt.Errorf("%s: %s", entriesPath, auditFailureLine(res.Failure))}
		}
		if !asJSON {
			fmt.Printf("ok: %d records of %s, %d checkpoints, %d records covered by the newest, root %s\n",
				res.Records, res.Tenant, res.Checkpoints, res.Covered, res.Root)
			if len(res.Cosigned) > 0 {
				fmt.Printf("the newest checkpoint is cosigned by the witnesses %v\n", res.Cosigned)
			}
			if res.Covered < res.Records {
				fmt.Printf("note: records %d to %d are not covered by a checkpoint; only the chain and their events' signatures were checked\n", res.Covered, res.Records-1)
			}
		}
		return nil
	}
	return cmd
}

// auditVerifyBundle checks an attempt's bundle offline.
func auditVerifyBundle(path, keysPath string, witnessKeys []string, quorum int, asJSON bool) error {
	var keys *audit.Keys
	if keysPath != "" {
		k, err := auditReadKeys(keysPath)
		if err != nil {
			return err
		}
		keys = &k
	}
	var ws []*audit.Cosigner
	for _, k := range witnessKeys {
		w, err := audit.ParseCosignerKey(k)
		if err != nil {
			return usageError("--witness-key: %v", err)
		}
		ws = append(ws, w)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	res, err := verifier.VerifyBundle(b, keys, ws, quorum)
	var f *audit.Failure
	if err != nil {
		f = audit.FailureOf(err)
	}
	if asJSON {
		out := map[string]any{"ok": f == nil, "attempt_id": res.Bundle.AttemptID, "tenant": res.Bundle.Tenant, "records": len(res.Events),
			"checkpoint_size": res.Checkpoint.Size, "cosigned": res.Cosigned}
		if f != nil {
			out["reason"], out["index"], out["detail"] = f.Reason, f.Index, f.Detail
		}
		if err := printJSON(out); err != nil {
			return err
		}
	}
	if f != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: %s", path, auditFailureLine(f))}
	}
	if !asJSON {
		fmt.Printf("ok: attempt %s of %s: %d records proven in the checkpoint of %d records, root %s\n",
			res.Bundle.AttemptID, res.Bundle.Tenant, len(res.Events), res.Checkpoint.Size, res.Checkpoint.Root)
		for _, ev := range res.Events {
			fmt.Printf("  %s %s %s\n", ev.Time, ev.Type, ev.Body)
		}
		if len(res.Cosigned) > 0 {
			fmt.Printf("the checkpoint is cosigned by the witnesses %v\n", res.Cosigned)
		}
	}
	return nil
}

func newAuditProveCmd() *cobra.Command {
	var eventID, attemptID, out, entriesPath, keysPath string
	cmd := &cobra.Command{
		Use:   "prove (--event ID --out proof.json | --attempt ID --out bundle.json [--entries entries.json --keys keys.json])",
		Short: "Prove one event's audit record, or one attempt's settlement in one file",
		Long: `With --event, fetch the inclusion proof of one event's audit record in the
latest checkpoint (proof.json; ctx audit verify-proof).

With --attempt, write bundle.json: one file that proves an attempt (a
settlement) to a third party: the audit records of every event of the attempt
and of its operation, each with its inclusion proof in one checkpoint that
carries the configured witnesses' cosignatures, and the log's keys.json. It is
made from the running daemon's log (an export of the records its newest
checkpoint covers), or offline from --entries and --keys. Check it with
"ctx audit-verify --bundle bundle.json --witness-key K --witnesses 1".`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&eventID, "event", "", "event id (ULID) whose record to prove")
	cmd.Flags().StringVar(&attemptID, "attempt", "", "attempt id whose records to prove in one bundle")
	cmd.Flags().StringVar(&out, "out", "", "proof or bundle file to write (required)")
	cmd.Flags().StringVar(&entriesPath, "entries", "", "with --attempt: make the bundle from this export instead of the running daemon")
	cmd.Flags().StringVar(&keysPath, "keys", "", "with --entries: the export's keys.json")
	cmd.RunE = func(*cobra.Command, []string) error {
		if (eventID == "") == (attemptID == "") || out == "" {
			return usageError("one of --event and --attempt, and --out, are required")
		}
		if attemptID != "" {
			return auditProveAttempt(c, attemptID, out, entriesPath, keysPath)
		}
		if entriesPath != "" || keysPath != "" {
			return usageError("--entries and --keys go with --attempt")
		}
		if err := codec.ValidEventID(eventID); err != nil {
			return usageError("--event: %v", err)
		}
		var p audit.Proof
		if err := auditFetch(c, wire.VerbAuditProve, wire.ProveRequest{EventID: eventID}, "proof", out, func(b []byte) (err error) {
			p, err = audit.ParseProof(b)
			return err
		}); err != nil {
			return err
		}
		if c.json {
			return printJSON(map[string]any{"index": p.Index, "tenant": p.Tenant, "out": out})
		}
		fmt.Printf("wrote the proof of record %d to %s\n", p.Index, out)
		return nil
	}
	return cmd
}

// auditProveAttempt writes an attempt's bundle, from the daemon's log or
// from an export.
func auditProveAttempt(c *connFlags, attemptID, out, entriesPath, keysPath string) error {
	var entries audit.Entries
	var keysJSON []byte
	switch {
	case entriesPath != "" && keysPath != "":
		e, err := readFileAs(entriesPath, func(b []byte) (audit.Entries, error) { return audit.ParseEntries(b) })
		if err != nil {
			return err
		}
		if keysJSON, err = os.ReadFile(keysPath); err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		entries = e
	case entriesPath != "" || keysPath != "":
		return usageError("--entries and --keys go together")
	default:
		oc, done, err := auditClient(c)
		if err != nil {
			return err
		}
		defer done()
		ctx := context.Background()
		if keysJSON, err = oc.File(ctx, wire.VerbAuditKeys, nil); err != nil {
			return auditOpsError(err)
		}
		if entries, err = exportEntries(ctx, oc); err != nil {
			return auditOpsError(err)
		}
		entries.Records = entries.Records[:entriesCovered(entries)]
	}
	b, err := verifier.NewBundle(entries, keysJSON, attemptID)
	switch {
	case errors.Is(err, verifier.ErrNotFound):
		return &ExitError{Code: 1, Err: fmt.Errorf("no audit record names attempt %s", attemptID)}
	case errors.Is(err, verifier.ErrNotCheckpointed):
		return &ExitError{Code: 1, Err: fmt.Errorf("the records of attempt %s are not all covered by a checkpoint yet: retry after the next one", attemptID)}
	case err != nil:
		return &ExitError{Code: 1, Err: err}
	}
	raw, err := verifier.MarshalBundle(b)
	if err != nil {
		return err
	}
	if err := auditWriteFile(out, raw); err != nil {
		return err
	}
	cp, _ := audit.ReadCheckpoint(b.Checkpoint)
	if c.json {
		return printJSON(map[string]any{"attempt_id": attemptID, "tenant": b.Tenant, "records": len(b.Records), "checkpoint_size": cp.Size, "out": out})
	}
	fmt.Printf("wrote the %d records of attempt %s, proven in the checkpoint of %d records, to %s\n", len(b.Records), attemptID, cp.Size, out)
	return nil
}

func newAuditVerifyProofCmd() *cobra.Command {
	var keysPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify-proof proof.json --keys keys.json",
		Short: "Verify one record's inclusion proof offline (exit 0 valid, 1 invalid)",
		Long: `Check a proof.json without the rest of the log: the checkpoint's signature, the
record's and its event's signatures, and the record's inclusion in the checkpoint's
Merkle tree. No network is used.`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&keysPath, "keys", "", "trusted keys.json (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		keys, b, err := auditReadKeysAndFile(keysPath, args[0])
		if err != nil {
			return err
		}
		p, r, err := verifier.VerifyProof(b, keys)
		if err != nil {
			return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", args[0], err)}
		}
		env, err := codec.Decode(r.Event)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		cp, err := audit.ReadCheckpoint(p.Checkpoint)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		if asJSON {
			return printJSON(map[string]any{"ok": true, "tenant": p.Tenant, "index": p.Index, "event_id": env.EventID,
				"event_type": env.Type, "event_seq": r.EventSeq, "checkpoint_size": cp.Size, "root": cp.Root.String()})
		}
		fmt.Printf("ok: record %d (event %s %s, seq %d) is in the checkpoint of %d records, root %s\n",
			p.Index, env.EventID, env.Type, r.EventSeq, cp.Size, cp.Root)
		return nil
	}
	return cmd
}

func newEventsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Export the tenant's raw signed events",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newEventsExportCmd())
	return cmd
}

func newEventsExportCmd() *cobra.Command {
	var out string
	var from uint64
	cmd := &cobra.Command{
		Use:   "export --out events.jsonl",
		Short: "Write the tenant's events as events.jsonl (input of ctx replay)",
		Long: `Fetch the tenant's events from contextosd, page by page, and write one canonical
line per event: {"event":<signed envelope>,"seq":<stream sequence>,"subject":...}.
--from continues an earlier export at a stream sequence.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&out, "out", "", "events file to write (required)")
	cmd.Flags().Uint64Var(&from, "from", 0, "first stream sequence to export (0: the start)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if out == "" {
			return usageError("--out is required")
		}
		oc, done, err := auditClient(c)
		if err != nil {
			return err
		}
		defer done()
		tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
		if err != nil {
			return err
		}
		defer func() { _ = os.Remove(tmp.Name()) }()
		w := bufio.NewWriter(tmp)
		lines, next, err := oc.ExportEvents(context.Background(), w, from)
		if err == nil {
			err = w.Flush()
		}
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return auditOpsError(err)
		}
		if err := os.Chmod(tmp.Name(), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), out); err != nil {
			return err
		}
		if c.json {
			return printJSON(map[string]any{"events": lines, "next": next, "out": out})
		}
		fmt.Printf("wrote %d events to %s (continue with --from %d)\n", lines, out, next)
		return nil
	}
	return cmd
}

// newExposureExportCmd is "export view.json" of the exposure view. It is
// registered as "ctx exposure-export"; the exposure command may also add it
// as its "export" subcommand.
func newExposureExportCmd(use string) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   use + " --out view.json",
		Short: "Write the live exposure view (balances, open attempts, incidents) as view.json",
		Long: `Fetch the exposure view of the tenant from contextosd: every resource ledger's
limit, committed, held and available, the open attempts with their next safe step,
and the incidents. "ctx replay --events events.jsonl --compare view.json" recomputes it
offline and reports any difference.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&out, "out", "", "view file to write (required)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if out == "" {
			return usageError("--out is required")
		}
		var v exposure.View
		if err := auditFetch(c, wire.VerbExposureView, nil, "view", out, func(b []byte) (err error) {
			v, err = exposure.ParseView(b)
			return err
		}); err != nil {
			return err
		}
		if c.json {
			return printJSON(map[string]any{"resources": len(v.Resources), "incidents": len(v.Incidents), "seq": v.Seq, "out": out})
		}
		fmt.Printf("wrote %d resources and %d incidents (as of seq %d) to %s\n", len(v.Resources), len(v.Incidents), v.Seq, out)
		return nil
	}
	return cmd
}

func newAuditProveConsistencyCmd() *cobra.Command {
	var entriesPath, out string
	var oldSize int64
	cmd := &cobra.Command{
		Use:   "prove-consistency --old-size N --out consistency.json [--entries entries.json]",
		Short: "Prove that the checkpoint of N records is a prefix of the latest checkpoint",
		Long: `prove-consistency writes consistency.json: the log's checkpoint of N records,
its latest checkpoint, and the Merkle consistency proof between them. Whoever
kept the older checkpoint checks, with the newer one and no records, that the
log it committed to was only appended to since. The proof comes from the
running contextosd (the audit-prove-consistency verb), or, with --entries,
from an export, offline.`,
		Args: cobra.NoArgs,
	}
	c := addConnFlags(cmd)
	cmd.Flags().StringVar(&entriesPath, "entries", "", "prove from this export (ctx audit export) instead of the running daemon")
	cmd.Flags().Int64Var(&oldSize, "old-size", 0, "size of the older checkpoint, one the log holds (required)")
	cmd.Flags().StringVar(&out, "out", "", "consistency file to write (required)")
	cmd.RunE = func(*cobra.Command, []string) error {
		if out == "" || oldSize <= 0 {
			return usageError("--old-size and --out are required")
		}
		var proof audit.Consistency
		if entriesPath == "" {
			if err := auditFetch(c, wire.VerbAuditProveConsistency, wire.ConsistencyRequest{OldSize: oldSize}, "consistency proof", out,
				func(b []byte) (err error) {
					proof, err = audit.ParseConsistency(b)
					return err
				}); err != nil {
				return err
			}
		} else {
			e, err := readFileAs(entriesPath, audit.ParseEntries)
			if err != nil {
				return err
			}
			if proof, err = verifier.ProveConsistency(e, oldSize); err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			b, err := audit.MarshalConsistency(proof)
			if err != nil {
				return err
			}
			if err := auditWriteFile(out, b); err != nil {
				return err
			}
		}
		cur, err := audit.ReadCheckpoint(proof.New)
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(map[string]any{"tenant": proof.Tenant, "old_size": oldSize, "new_size": cur.Size, "out": out})
		}
		fmt.Printf("wrote the proof that the checkpoint of %d records is a prefix of the checkpoint of %d to %s\n", oldSize, cur.Size, out)
		return nil
	}
	return cmd
}

func newAuditVerifyConsistencyCmd() *cobra.Command {
	var keysPath, oldPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify-consistency consistency.json --keys keys.json [--old CHECKPOINT]",
		Short: "Verify offline that an older checkpoint is a prefix of a newer one (exit 0 valid, 1 invalid)",
		Long: `Check a consistency.json: both checkpoints' signatures under the trusted keys, and
the Merkle proof that the older log is a prefix of the newer. With --old, the
older checkpoint must also be byte for byte the signed note you kept. No
network is used.`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&keysPath, "keys", "", "trusted keys.json (required)")
	cmd.Flags().StringVar(&oldPath, "old", "", "the signed checkpoint note you kept, to compare")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		keys, b, err := auditReadKeysAndFile(keysPath, args[0])
		if err != nil {
			return err
		}
		c, old, cur, err := verifier.VerifyConsistency(b, keys)
		if err != nil {
			return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", args[0], err)}
		}
		if oldPath != "" {
			kept, err := os.ReadFile(oldPath)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if !bytes.Equal(kept, c.Old) {
				return &ExitError{Code: 1, Err: fmt.Errorf("%s: the older checkpoint is not the one in %s", args[0], oldPath)}
			}
		}
		if asJSON {
			return printJSON(map[string]any{"ok": true, "tenant": c.Tenant, "old_size": old.Size, "old_root": old.Root.String(),
				"new_size": cur.Size, "new_root": cur.Root.String()})
		}
		fmt.Printf("ok: the log of %d records (root %s) is a prefix of the log of %d records (root %s)\n", old.Size, old.Root, cur.Size, cur.Root)
		return nil
	}
	return cmd
}

func newAuditKeysCmd() *cobra.Command {
	var fromKeys []string
	var witnessKeys []string
	var tenant, out string
	cmd := &cobra.Command{
		Use:   "keys --from-key FILE --tenant T [--out keys.json]",
		Short: "Print keys.json (public keys only) from the runtime's key file, for an auditor out of band",
		Long: `Read the runtime's key file(s) (runtime.key_file; repeat --from-key for retired
ones) and print the tenant's keys.json: the public keys that sign events and
checkpoints, and the --witness-key witnesses. Nothing secret is printed: give
the result to auditors out of band, so that they do not have to trust the
keys a running daemon publishes.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringArrayVar(&fromKeys, "from-key", nil, "a runtime key file; repeatable (required)")
	cmd.Flags().StringArrayVar(&witnessKeys, "witness-key", nil, "a witness's cosignature key; repeatable")
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant whose log the keys verify (required)")
	cmd.Flags().StringVar(&out, "out", "", "write to this file instead of stdout")
	cmd.RunE = func(*cobra.Command, []string) error {
		if len(fromKeys) == 0 || tenant == "" {
			return usageError("--from-key and --tenant are required")
		}
		var pubs []ed25519.PublicKey
		for _, p := range fromKeys {
			key, err := codec.LoadPrivateKey(p)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			pubs = append(pubs, key.Public().(ed25519.PublicKey))
		}
		keys, err := audit.KeysFor(tenant, pubs...)
		if err != nil {
			return usageError("%v", err)
		}
		for _, k := range witnessKeys {
			if _, err := audit.ParseCosignerKey(k); err != nil {
				return usageError("--witness-key: %v", err)
			}
			keys.WitnessKeys = append(keys.WitnessKeys, k)
		}
		b, err := audit.MarshalKeys(keys)
		if err != nil {
			return err
		}
		if out != "" {
			return auditWriteFile(out, b)
		}
		_, err = os.Stdout.Write(b)
		return err
	}
	return cmd
}

// exportEntries fetches the tenant's audit log as the verifier reads it.
func exportEntries(ctx context.Context, c *client.AuditClient) (audit.Entries, error) {
	e, err := c.ExportAudit(ctx)
	return audit.Entries(e), err
}
