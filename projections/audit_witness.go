package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/audit/witness"
	"github.com/contextos/ledger/kernel"
)

// WitnessUnreachable is the kind of a WitnessReport whose witness did not
// answer (a transport error or the timeout).
const WitnessUnreachable = "unreachable"

// integrityRetry is how often a projector asks again a witness that said
// the log shrank or forked: nothing but an operator's action changes that
// answer, while a witness that was down may be back any second.
const integrityRetry = 30 * time.Second

// WitnessReport is one witness's answer to one checkpoint the projector
// submitted.
type WitnessReport struct {
	Tenant  string
	Witness string // the witness's key name
	URL     string
	Size    int64 // the checkpoint's size
	// Kind is "" when the witness cosigned, a witness.Refusal* kind when it
	// refused, WitnessUnreachable when it did not answer.
	Kind        string
	WitnessSize int64 // the size the witness had cosigned, when it said (409)
	Err         error
}

// Integrity reports whether the witness says the log's history is not the
// one it saw: the log shrank or forked.
func (r WitnessReport) Integrity() bool {
	return r.Kind == witness.RefusalShrank || r.Kind == witness.RefusalForked
}

// report classifies a witness's answer.
func (p *AuditProjector) report(w *witness.Client, size int64, err error) WitnessReport {
	r := WitnessReport{Tenant: p.cfg.Tenant, Witness: w.Name(), URL: w.URL, Size: size, Err: err}
	var re *witness.RefusedError
	switch {
	case err == nil:
	case errors.As(err, &re):
		r.Kind, r.WitnessSize = re.Kind(size), re.Size
	default:
		r.Kind = WitnessUnreachable
	}
	return r
}

// witnessed records the answers to one submission: the log is witnessed
// when every witness cosigned it.
func (p *AuditProjector) witnessed(reports []WitnessReport) {
	if len(reports) == 0 {
		return
	}
	state, reason, integrity := kernel.WitnessCosigned, "", false
	for _, r := range reports {
		if r.Kind != "" {
			state = kernel.WitnessMissing
			reason = fmt.Sprintf("witness %s: %s: %v", r.Witness, r.Kind, r.Err)
			integrity = integrity || r.Integrity()
		}
	}
	p.mu.Lock()
	p.wstate, p.wreason, p.wlast, p.wintegrity = state, reason, p.cfg.Clock.Now(), integrity
	p.mu.Unlock()
	if p.cfg.OnWitness != nil {
		for _, r := range reports {
			p.cfg.OnWitness(r)
		}
	}
}

// Witnessing returns the state of the latest submission to the witnesses:
// pending until the boot check is answered, then cosigned or missing (with
// why). A projector without witnesses is always cosigned.
func (p *AuditProjector) Witnessing() (kernel.Witnessing, string) {
	if len(p.cfg.Witnesses) == 0 {
		return kernel.WitnessCosigned, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wstate, p.wreason
}

// checkWitnesses submits the log as it stands to the witnesses when no
// checkpoint was submitted since the projector started (the boot check: a
// history rewritten while the runtime was stopped is caught before the
// first checkpoint falls due), and again while one is missing a
// cosignature, so that a witness back from an outage is known as soon as
// it answers. With uncovered records it publishes a checkpoint; otherwise
// it signs the checkpoint of the log's size again (the same bytes, signatures
// being deterministic) and submits it without appending it.
func (p *AuditProjector) checkWitnesses(ctx context.Context) error {
	if len(p.cfg.Witnesses) == 0 {
		return nil
	}
	p.mu.Lock()
	due := p.wstate == kernel.WitnessPending
	if p.wstate == kernel.WitnessMissing {
		retry := p.cfg.PollInterval
		if p.wintegrity {
			retry = max(retry, integrityRetry)
		}
		due = p.cfg.Clock.Now().Sub(p.wlast) >= retry
	}
	uncovered := p.chain.Size() > p.ckSize
	size, root := p.chain.Size(), p.chain.Root()
	p.mu.Unlock()
	if !due {
		return nil
	}
	if uncovered {
		return p.checkpoint(ctx, true)
	}
	msg, err := audit.SignCheckpoint(audit.Checkpoint{Origin: audit.Origin(p.cfg.Tenant), Size: size, Root: root}, p.noteSigner)
	if err != nil {
		return err
	}
	p.cosign(ctx, msg)
	return nil
}

// ProveRotation implements witness.RotationProver: the audit record of the
// latest key rotation among the log's first size records and its inclusion
// proof in their tree, read from the log (a rotation is rare: a witness
// asks for it once, after the rotation).
func (p *AuditProjector) ProveRotation(ctx context.Context, size int64) (audit.KeyChange, bool, error) {
	p.mu.Lock()
	r := p.chain.rotation
	p.mu.Unlock()
	if r == 0 || r-1 >= size {
		return audit.KeyChange{}, false, nil
	}
	index := r - 1
	ranges, err := audit.InclusionRanges(index, size)
	if err != nil {
		return audit.KeyChange{}, false, err
	}
	ps, err := logPass(ctx, p.cfg.Log, newChain(p.cfg.Tenant), size, ranges, nil, index)
	if err != nil {
		return audit.KeyChange{}, false, err
	}
	return audit.KeyChange{Index: index, Record: ps.raw, Proof: ps.hashes}, true, nil
}
