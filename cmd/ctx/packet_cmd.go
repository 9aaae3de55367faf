package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/contextos/ledger/aggregates"
	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
	"github.com/contextos/ledger/packet"
	"github.com/contextos/ledger/verifier"
	"github.com/contextos/ledger/wire"
	"github.com/spf13/cobra"
)

// packetReplay is the JSON form of a packet's replay (ctx replay --packet --json).
type packetReplay struct {
	Equal      bool               `json:"equal"`
	Recorded   string             `json:"recorded"`
	Replayed   string             `json:"replayed"`
	Difference *packet.Difference `json:"difference,omitempty"`
}

// replayPacket verifies and replays one decision's packet: exit 0 equal,
// 1 refused or different.
func replayPacket(path, keysPath string, asJSON bool) error {
	var trusted codec.Keyring
	if keysPath != "" {
		k, err := auditReadKeys(keysPath)
		if err != nil {
			return err
		}
		trusted = k.Keyring
		if trusted == nil {
			trusted = codec.Keyring{}
		}
	}
	p, err := readFileAs(path, packet.Parse)
	if err != nil {
		return err
	}
	if err := p.Verify(trusted); err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", path, err)}
	}
	res, err := p.Replay()
	if err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("%s cannot be replayed: %w", path, err)}
	}
	return reportReplay(res, asJSON)
}

func reportReplay(res packet.Result, asJSON bool) error {
	if asJSON {
		if err := printJSON(packetReplay{Equal: res.Equal, Recorded: res.Recorded, Replayed: res.Replayed, Difference: res.Difference}); err != nil {
			return err
		}
	} else if res.Equal {
		fmt.Fprintf(stdout, "equal: %s\n", res.Recorded)
	}
	if !res.Equal {
		return &ExitError{Code: 1, Err: errors.New("differs: " + res.Difference.String())}
	}
	return nil
}

// packetSource is where ctx decisions packet and --replay read the log,
// the keys and the configuration from.
type packetSource struct {
	configPath, entriesPath, keysPath string
}

func (s *packetSource) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.configPath, "config", "", "the daemon's configuration file the decisions were made under")
	f.StringVar(&s.entriesPath, "entries", "", "entries.json (ctx audit export) to read the log from instead of the daemon")
	f.StringVar(&s.keysPath, "keys", "", "keys.json trusted to sign the events (with --entries; else the daemon's)")
}

// packetLog is a tenant's log, its keys and configuration, read once.
type packetLog struct {
	tenant string
	log    []packet.LogEvent
	keys   codec.Keyring
	cfg    *config.Config
}

// load reads the configuration and the log: from --entries (verified with
// --keys), or from the daemon's audit export and keys.
func (s *packetSource) load(c *connFlags) (*packetLog, error) {
	if s.configPath == "" {
		return nil, usageError("--config is required: the packet carries the configuration the decision was made under")
	}
	cfg, err := config.Load(s.configPath)
	if err != nil {
		return nil, &ExitError{Code: 1, Err: err}
	}
	var entries audit.Entries
	var keys audit.Keys
	if s.entriesPath != "" {
		var b []byte
		if keys, b, err = auditReadKeysAndFile(s.keysPath, s.entriesPath); err != nil {
			return nil, err
		}
		// Records past the newest checkpoint are accepted (an export with
		// --allow-partial): the packet needs each event's own signature,
		// which the replay checks again, not the checkpoint's.
		res, err := verifier.VerifyEntriesPolicy(b, keys, verifier.Policy{AllowPartial: true})
		if err != nil || !res.OK() {
			return nil, &ExitError{Code: 1, Err: fmt.Errorf("%s does not verify: %v %v", s.entriesPath, err, res.Failure)}
		}
		if entries, err = audit.ParseEntries(b); err != nil {
			return nil, &ExitError{Code: 1, Err: err}
		}
	} else {
		if err := c.fill(); err != nil {
			return nil, err
		}
		oc, done, err := auditClient(c)
		if err != nil {
			return nil, err
		}
		defer done()
		ctx := context.Background()
		keysJSON, err := oc.File(ctx, wire.VerbAuditKeys, nil)
		if err != nil {
			return nil, auditOpsError(err)
		}
		if keys, err = audit.ParseKeys(keysJSON); err != nil {
			return nil, fmt.Errorf("keys from contextosd: %w", err)
		}
		if entries, err = exportEntries(ctx, oc); err != nil {
			return nil, auditOpsError(err)
		}
	}
	pl := &packetLog{tenant: entries.Tenant, keys: keys.Keyring, cfg: cfg}
	for i, raw := range entries.Records {
		r, env, err := audit.Parse(raw)
		if err != nil {
			return nil, &ExitError{Code: 1, Err: fmt.Errorf("record %d: %w", i, err)}
		}
		pl.log = append(pl.log, packet.LogEvent{Seq: r.EventSeq, Subject: r.Subject, Envelope: env})
	}
	return pl, nil
}

// build makes the packet of one decision record (its seq or event id).
func (pl *packetLog) build(decision string) (*packet.Packet, error) {
	var rec kernel.DecisionRecorded
	found := false
	for _, e := range pl.log {
		if e.Envelope.Type == kernel.TypeDecisionRecorded && (fmt.Sprint(e.Seq) == decision || e.Envelope.EventID == decision) {
			ev, err := kernel.DecodeCanonicalEvent(e.Envelope.Type, e.Envelope.V, e.Envelope.Body)
			if err != nil {
				return nil, err
			}
			rec, found = ev.(kernel.DecisionRecorded), true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("no decision record %s in the log", decision)
	}
	if rec.ManifestDigest != "" && rec.ManifestDigest != pl.cfg.Digest {
		return nil, fmt.Errorf("decision %s was made under configuration %s; --config is %s", decision, rec.ManifestDigest, pl.cfg.Digest)
	}
	m, err := manifestSubset(pl.cfg, pl.tenant, rec.Principal, rec.CapabilityID)
	if err != nil {
		return nil, err
	}
	return packet.Build(packet.BuildInput{Tenant: pl.tenant, Decision: decision, Log: pl.log, Manifest: m, Keys: pl.keys,
		Subject: func(k kernel.Key) (string, error) {
			r, err := aggregates.RefOf(pl.tenant, k)
			return r.Subject, err
		}})
}

// manifestSubset is the part of the configuration that decides a proposal
// of capabilityID by principal of tenant, as the daemon loads it.
func manifestSubset(cfg *config.Config, tenant, principal, capabilityID string) (packet.Manifest, error) {
	tc, ok := cfg.Tenant(tenant)
	if !ok {
		return packet.Manifest{}, fmt.Errorf("the configuration has no tenant %s", tenant)
	}
	m := packet.Manifest{Digest: cfg.Digest, MaxProposalBytes: cfg.Runtime.MaxProposalBytes,
		Tenant: packet.Tenant{ID: tc.ID, AllowUnadmitted: tc.AllowsUnadmitted()}}
	if a, ok := tc.Agent(principal); ok {
		m.Tenant.Agent = &packet.Agent{ID: a.ID, Capabilities: a.Capabilities, EvidenceSources: a.EvidenceSources}
	}
	cp, ok := cfg.Capability(capabilityID)
	if !ok {
		return m, nil
	}
	pol := cp.CompiledPolicy().Policy()
	c := &packet.Capability{ID: cp.ID, Version: cp.Version, Risk: cp.Risk, Effectful: cp.Effectful, Approval: cp.Approval,
		RunAmount: cp.AmountPointer, Policy: &pol, DecisionKey: cp.DecisionKey, BreakerThreshold: cp.Breaker.Threshold,
		NoSameActionFence: !cp.SameActionFenced()}
	if c.RunAmount == "" {
		c.RunAmount = pol.AmountPointer
	}
	if cp.Breaker.Threshold > 0 {
		c.BreakerWindow = time.Duration(cp.Breaker.Window.Duration).String()
	}
	if pk := cp.Pack(); pk != nil {
		b, err := json.Marshal(pk)
		if err != nil {
			return m, err
		}
		c.Pack = b
	}
	m.Capability = c
	for _, d := range cfg.GuaranteesFor(capabilityID) {
		g := packet.Guarantee{Definition: d}
		if d.Calendar() && d.TimeZone != "" {
			g.Zone = d.TimeZone
		}
		m.Guarantees = append(m.Guarantees, g)
	}
	return m, nil
}

func newDecisionsPacketCmd() *cobra.Command {
	var decision, out string
	var src packetSource
	cmd := &cobra.Command{
		Use:   "packet --decision SEQ --config contextosd.toml [--entries entries.json --keys keys.json] --out packet.json",
		Short: "Write everything one decision depended on to a replay packet",
		Long: `Write one proposal's decision (by its seq in ctx decisions, or its event id) and
everything the kernel's step read when it decided it to one file
(docs/schema/decision-packet.json): the signed decision record, the proposal as
its record names it, the configuration subset of its capability (from --config,
which must be the file the record's manifest_digest names), the pins and the
pack version, the signed events of every subject the step read, up to the batch
that opened the operation, and the keys that signed them. The log is the
daemon's audit export, or --entries (verified against --keys). ctx replay
--packet re-runs the decision offline from the file.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&decision, "decision", "", "the decision record's seq (ctx decisions) or event id")
	cmd.Flags().StringVar(&out, "out", "", "the packet file to write")
	src.flags(cmd)
	c := addConnFlags(cmd)
	cmd.RunE = func(*cobra.Command, []string) error {
		if decision == "" || out == "" {
			return usageError("--decision and --out are required")
		}
		pl, err := src.load(c)
		if err != nil {
			return err
		}
		p, err := pl.build(decision)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		b, err := packet.Marshal(p)
		if err != nil {
			return err
		}
		return auditWriteFile(out, b)
	}
	return cmd
}

// replayDecisions builds and replays the packet of every row: exit 1 when
// any differs or cannot be built.
func replayDecisions(rows []map[string]any, src *packetSource, c *connFlags) error {
	pl, err := src.load(c)
	if err != nil {
		return err
	}
	bad := 0
	for _, r := range rows {
		seq := fmt.Sprint(r["seq"])
		if f, ok := r["seq"].(float64); ok {
			seq = fmt.Sprint(uint64(f))
		}
		p, err := pl.build(seq)
		if err == nil {
			err = p.Verify(pl.keys)
		}
		var res packet.Result
		if err == nil {
			res, err = p.Replay()
		}
		switch {
		case err != nil:
			bad++
			fmt.Fprintf(stdout, "%s\t%v\tnot replayed: %v\n", seq, r["operation_id"], err)
		case res.Equal:
			fmt.Fprintf(stdout, "%s\t%v\tequal: %s\n", seq, r["operation_id"], res.Recorded)
		default:
			bad++
			fmt.Fprintf(stdout, "%s\t%v\tdiffers: %s\n", seq, r["operation_id"], res.Difference)
		}
	}
	fmt.Fprintf(stdout, "%d decisions replayed, %d differ or could not be replayed\n", len(rows), bad)
	if bad > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d decisions differ or could not be replayed", bad, len(rows))}
	}
	return nil
}
