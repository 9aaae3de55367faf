package kernel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/contextos/ledger/wire"
)

// This file holds the tenant's catalog of context pack versions: publish
// (content-addressed, immutable), promote (behind the release gate) and
// roll back. docs/context.md, "Pack versions", describes the rules.

// MaxPackVersions bounds the versions a tenant's catalog holds; versions
// are never deleted, so the catalog's state stays bounded by it.
const MaxPackVersions = 256

// maxPromotions bounds the promotion history a rollback walks back.
const maxPromotions = MaxPackVersions

// PackRef names one published pack version (wire.PackRef): its id, its
// version and the digest of its canonical form (PackDigest, the digest a
// compiled context's dependencies carry).
type PackRef = wire.PackRef

// PackDigest returns the hex SHA-256 of the pack's canonical form: its sets
// sorted, then JCS. Two packs that differ only in the order of a set have
// one digest.
func PackDigest(p ContextPack) (string, error) { return Digest(canonicalPack(p)) }

// PackVersion is one published version and who published it.
type PackVersion struct {
	PackRef
	Pack     ContextPack `json:"pack"`
	Operator string      `json:"operator"`
}

// PackCatalog is the state of the tenant's pack subject
// (ctx.ev.<tenant>.pack): every version published, in publication order,
// and the promotions, the last of which is the promoted version.
type PackCatalog struct {
	Versions   []PackVersion `json:"versions,omitempty"`
	Promotions []string      `json:"promotions,omitempty"` // digests, oldest first; rollback pops
}

// Promoted returns the promoted version (false when none is).
func (c *PackCatalog) Promoted() (PackVersion, bool) {
	if c == nil || len(c.Promotions) == 0 {
		return PackVersion{}, false
	}
	return c.byDigest(c.Promotions[len(c.Promotions)-1])
}

func (c *PackCatalog) byDigest(d string) (PackVersion, bool) {
	for _, v := range c.Versions {
		if v.Digest == d {
			return v, true
		}
	}
	return PackVersion{}, false
}

// Resolve finds the version spec names: "id@version", or a digest (64
// lowercase hex digits).
func (c *PackCatalog) Resolve(spec string) (PackVersion, bool) {
	if c == nil {
		return PackVersion{}, false
	}
	if id, ver, ok := strings.Cut(spec, "@"); ok {
		for _, v := range c.Versions {
			if v.PackID == id && v.Version == ver {
				return v, true
			}
		}
		return PackVersion{}, false
	}
	if len(spec) != 64 || !isLowerHex(spec) {
		return PackVersion{}, false
	}
	return c.byDigest(spec)
}

// Pack event types.
const (
	TypePackPublished  = "pack.published"
	TypePackPromoted   = "pack.promoted"
	TypePackRolledBack = "pack.rolled_back"
)

// PackPublished publishes one pack version. Its digest is computed by the
// kernel from the pack, never taken from the request.
type PackPublished struct {
	PackRef
	Pack     ContextPack `json:"pack"`
	Operator string      `json:"operator"`
}

// PackPromoted makes a published version the promoted one: what a run
// admitted without a pack version pins. Previous is the digest it replaces
// ("" for the first promotion); Eval is the release gate's evidence.
type PackPromoted struct {
	PackRef
	Previous string       `json:"previous,omitempty"`
	Operator string       `json:"operator"`
	Eval     *ReleaseEval `json:"eval,omitempty"`
	// AbstentionBoundBP is the bound the gate applied, in basis points.
	AbstentionBoundBP int64 `json:"abstention_bound_bp"`
}

// PackRolledBack demotes the promoted version (From) and re-promotes the one
// promoted before it (PackRef).
type PackRolledBack struct {
	PackRef
	From     string `json:"from"`
	Operator string `json:"operator"`
}

// EventType implements Event.
func (PackPublished) EventType() string { return TypePackPublished }

// EventType implements Event.
func (PackPromoted) EventType() string { return TypePackPromoted }

// EventType implements Event.
func (PackRolledBack) EventType() string { return TypePackRolledBack }

func init() {
	register[PackPublished](TypePackPublished)
	register[PackPromoted](TypePackPromoted)
	register[PackRolledBack](TypePackRolledBack)
}

// Apply folds a pack event.
func (c *PackCatalog) Apply(ev Event) error {
	switch e := ev.(type) {
	case PackPublished:
		if _, ok := c.byDigest(e.Digest); ok || len(c.Versions) >= MaxPackVersions {
			return fmt.Errorf("pack %s published twice or beyond the catalog's bound", e.PackRef)
		}
		c.Versions = append(c.Versions, PackVersion{PackRef: e.PackRef, Pack: normalizePack(e.Pack), Operator: e.Operator})
	case PackPromoted:
		if _, ok := c.byDigest(e.Digest); !ok {
			return fmt.Errorf("promotion of unpublished pack %s", e.PackRef)
		}
		c.Promotions = append(c.Promotions, e.Digest)
		if len(c.Promotions) > maxPromotions {
			c.Promotions = slices.Delete(c.Promotions, 0, len(c.Promotions)-maxPromotions)
		}
	case PackRolledBack:
		n := len(c.Promotions)
		if n < 2 || c.Promotions[n-1] != e.From || c.Promotions[n-2] != e.Digest {
			return fmt.Errorf("rollback of %s to %s does not match the promotions", e.From, e.PackRef)
		}
		c.Promotions = c.Promotions[:n-1]
	default:
		return fmt.Errorf("event %T does not belong to the pack subject", ev)
	}
	return nil
}

// PublishPack is the command of `ctx context publish`.
type PublishPack struct {
	Operator string
	Pack     ContextPack
}

// DecidePublishPack publishes a version. The pack must be valid
// (CodeContextInvalid); its digest is its identity: the same content again
// is a no-op, other content under a published id@version is refused
// (CodePackVersionConflict), and the catalog holds at most MaxPackVersions
// (CodePackVersionsExhausted).
func DecidePublishPack(c *PackCatalog, cmd PublishPack) Decision {
	p := normalizePack(cmd.Pack)
	if err := validatePack(p); err != nil {
		return no(wire.CodeContextInvalid, "%v", err)
	}
	if cmd.Operator == "" {
		return no(wire.CodeRequestMalformed, "a pack version names its publisher")
	}
	d, err := PackDigest(p)
	if err != nil {
		return no(wire.CodeContextInvalid, "pack digest: %v", err)
	}
	ref := PackRef{PackID: p.PackID, Version: p.Version, Digest: d}
	if v, ok := c.Resolve(ref.String()); ok {
		if v.Digest == d {
			return Decision{}
		}
		return no(wire.CodePackVersionConflict, "pack %s is published with digest %s; this content has digest %s: publish it as a new version",
			clip(ref.String()), v.Digest, d)
	}
	if len(c.Versions) >= MaxPackVersions {
		return no(wire.CodePackVersionsExhausted, "the tenant holds %d pack versions, the most it may", MaxPackVersions)
	}
	return Decision{Events: []Event{PackPublished{PackRef: ref, Pack: p, Operator: cmd.Operator}}}
}

// EvalFigures are one pack version's figures from `ctx context eval` on a
// case set: the version evaluated (its digest), the cases, and the gate's
// false closures and false abstentions against the independent grader.
type EvalFigures struct {
	Digest           string `json:"digest"`
	Cases            int64  `json:"cases"`
	FalseClosures    int64  `json:"false_closures"`
	FalseAbstentions int64  `json:"false_abstentions"`
}

// ReleaseEval is the evidence a promotion carries: the candidate's and the
// promoted version's figures on the same held-out cases (CasesDigest).
type ReleaseEval struct {
	CasesDigest string       `json:"cases_digest"`
	Candidate   EvalFigures  `json:"candidate"`
	Current     *EvalFigures `json:"current,omitempty"`
}

// DefaultAbstentionBoundBP is the release gate's default bound on false
// abstentions: the candidate's rate may exceed the promoted version's by at
// most 2 percentage points (200 basis points).
const DefaultAbstentionBoundBP = 200

// maxEvalCases bounds a case set's size so the gate's integer arithmetic
// stays exact.
const maxEvalCases = 1_000_000

// PromotePack is the command of `ctx context promote`: the version (spec:
// id@version or digest), its release evaluation and the tenant's bound on
// false abstentions in basis points.
type PromotePack struct {
	Operator          string
	Spec              string
	Eval              *ReleaseEval
	AbstentionBoundBP int64
}

// DecidePromotePack promotes a published version (CodePackUnknown
// otherwise) through the release gate. With a version already promoted the
// promotion needs an evaluation of both versions on one case set, and
// CheckReleaseGate must pass (CodeReleaseGateFailed). The first promotion
// has nothing to compare with and passes with any evaluation or none.
// Promoting the promoted version is a no-op.
func DecidePromotePack(c *PackCatalog, cmd PromotePack) Decision {
	if cmd.Operator == "" {
		return no(wire.CodeRequestMalformed, "a promotion names its operator")
	}
	v, ok := c.Resolve(cmd.Spec)
	if !ok {
		return no(wire.CodePackUnknown, "pack version %q is not published", clip(cmd.Spec))
	}
	cur, has := c.Promoted()
	if has && cur.Digest == v.Digest {
		return Decision{}
	}
	ev := PackPromoted{PackRef: v.PackRef, Operator: cmd.Operator, Eval: cmd.Eval, AbstentionBoundBP: cmd.AbstentionBoundBP}
	if has {
		ev.Previous = cur.Digest
		if r := CheckReleaseGate(v.Digest, cur.Digest, cmd.Eval, cmd.AbstentionBoundBP); r != nil {
			return Decision{Refusal: r}
		}
	}
	return Decision{Events: []Event{ev}}
}

// CheckReleaseGate is the release gate: eval measured the candidate and the
// current version (by digest) on the same cases; the candidate makes no
// more false closures than the current one, and its false-abstention rate
// exceeds the current one's by at most boundBP basis points.
func CheckReleaseGate(candidate, current string, eval *ReleaseEval, boundBP int64) *Refusal {
	fail := func(format string, args ...any) *Refusal { return refuse(wire.CodeReleaseGateFailed, format, args...) }
	switch {
	case eval == nil || eval.Current == nil:
		return fail("promoting over the promoted version %s needs an evaluation of both on held-out cases (ctx context promote --cases DIR)", current)
	case eval.Candidate.Digest != candidate || eval.Current.Digest != current:
		return fail("the evaluation measured %s over %s, not the candidate %s over the promoted %s",
			clip(eval.Candidate.Digest), clip(eval.Current.Digest), candidate, current)
	case len(eval.CasesDigest) != 64 || !isLowerHex(eval.CasesDigest):
		return fail("the evaluation names its case set by a digest (64 lowercase hex digits)")
	case boundBP < 0 || boundBP > 10_000:
		return fail("the false-abstention bound must be 0..10000 basis points, not %d", boundBP)
	}
	a, b := eval.Candidate, *eval.Current
	for _, f := range []EvalFigures{a, b} {
		if f.Cases < 1 || f.Cases > maxEvalCases || f.FalseClosures < 0 || f.FalseAbstentions < 0 || f.FalseClosures+f.FalseAbstentions > f.Cases {
			return fail("figures of %s are out of range (cases 1..%d, errors at most the cases)", clip(f.Digest), maxEvalCases)
		}
	}
	if a.Cases != b.Cases {
		return fail("the candidate was evaluated on %d cases, the promoted version on %d: one case set measures both", a.Cases, b.Cases)
	}
	if a.FalseClosures > b.FalseClosures {
		return fail("the candidate makes %d false closures on %d cases, the promoted version %d: never more", a.FalseClosures, a.Cases, b.FalseClosures)
	}
	// a.FA/n <= b.FA/n + bound/10000, in integers.
	if a.FalseAbstentions*10_000 > b.FalseAbstentions*10_000+boundBP*a.Cases {
		return fail("the candidate abstains falsely on %d of %d cases, the promoted version on %d: more than %d basis points worse",
			a.FalseAbstentions, a.Cases, b.FalseAbstentions, boundBP)
	}
	return nil
}

// RollbackPack is the command of `ctx context rollback`.
type RollbackPack struct {
	Operator string
}

// DecideRollbackPack demotes the promoted version and re-promotes the one
// promoted before it, without a release gate: that version passed its own
// when it was promoted. CodePackUnknown when there is no earlier promotion.
func DecideRollbackPack(c *PackCatalog, cmd RollbackPack) Decision {
	if cmd.Operator == "" {
		return no(wire.CodeRequestMalformed, "a rollback names its operator")
	}
	n := len(c.Promotions)
	if n < 2 {
		return no(wire.CodePackUnknown, "no earlier promotion to roll back to (%d promotion(s) on record)", n)
	}
	prev, ok := c.byDigest(c.Promotions[n-2])
	if !ok {
		return no(wire.CodePackUnknown, "the earlier promotion %s is not in the catalog", c.Promotions[n-2])
	}
	return Decision{Events: []Event{PackRolledBack{PackRef: prev.PackRef, From: c.Promotions[n-1], Operator: cmd.Operator}}}
}

// PinPack is the pack version a run admitted with spec pins: the version
// spec names (CodePackUnknown when none), or without spec the promoted
// version (none: the run pins nothing).
func PinPack(c *PackCatalog, spec string) (*PackRef, *Refusal) {
	if spec == "" {
		v, ok := c.Promoted()
		if !ok {
			return nil, nil
		}
		return &v.PackRef, nil
	}
	v, ok := c.Resolve(spec)
	if !ok {
		return nil, refuse(wire.CodePackUnknown, "pack version %q is not published", clip(spec))
	}
	return &v.PackRef, nil
}

// pinOf is the pack version a proposal is decided under: the version its
// evidence gate was compiled under, else the version its run pinned.
func pinOf(compiled *PackRef, run *Run) *PackRef {
	if compiled == nil && run != nil && run.Pack != nil {
		p := *run.Pack
		return &p
	}
	return compiled
}

// recordPack sets the pack version a decision record names.
func recordPack(rec *DecisionRecorded, p *PackRef) {
	if p != nil {
		rec.PackID, rec.PackVersion, rec.PackDigest = p.PackID, p.Version, p.Digest
	}
}

// manifestPack is the reference of a gated capability's configured pack
// (nil when it has none or its digest cannot be computed).
func manifestPack(p *ContextPack) *PackRef {
	if p == nil {
		return nil
	}
	d, err := PackDigest(*p)
	if err != nil {
		return nil
	}
	return &PackRef{PackID: p.PackID, Version: p.Version, Digest: d}
}
