package chaos

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/contextos/ledger/internal/testing/lincheck"
	"github.com/contextos/ledger/internal/testing/provider"
	"github.com/contextos/ledger/kernel"
)

// Accounting compares the provider's records, the stream and what clients
// were told.
type Accounting struct {
	ProviderCalls   int // POST /refunds received
	ProviderKeys    int // distinct idempotency keys
	ProviderApplied int // refunds that took effect
	Replays         int // calls on a key already seen (answered from the record, no second effect)
	Committed       int // committed receipts in the stream
	Acks            int // acknowledgements clients saw

	EffectWithoutReceipt []string // provider applied, no committed receipt
	ReceiptWithoutEffect []string // committed receipt, provider has no applied refund
	OverCeiling          []string // an order refunded above its ceiling at the provider
	Mismatch             []string // provider-applied sum of an order != its ledger's committed
	AcksLost             []string // an acknowledgement the stream does not back
}

// Violations is every violation, one line each.
func (a Accounting) Violations() []string {
	var out []string
	for _, l := range [][]string{a.EffectWithoutReceipt, a.ReceiptWithoutEffect, a.OverCeiling, a.Mismatch, a.AcksLost} {
		out = append(out, l...)
	}
	return out
}

// Account checks rep (the audited stream, after reconciliation) against the
// provider's refunds and the acknowledgements.
func Account(rep *lincheck.Report, prov *provider.Server, acks []Ack, tenant, guaranteeID string, limit int64) Accounting {
	st := prov.Stats()
	a := Accounting{ProviderCalls: st.Calls, ProviderKeys: st.Keys, ProviderApplied: st.Applied, Acks: len(acks)}
	applied := map[string]int64{} // order -> provider-applied sum
	for _, rf := range prov.Refunds() {
		a.Replays += rf.Calls - 1
		if !rf.Applied {
			continue
		}
		var args struct {
			OrderID string `json:"order_id"`
			Amount  int64  `json:"amount_minor"`
		}
		_ = json.Unmarshal(rf.Args, &args)
		applied[args.OrderID] += args.Amount
		at, ok := rep.Attempts[rf.Key]
		if !ok || at.State != kernel.StateCommitted {
			state := "no receipt"
			if ok {
				state = at.State.String()
			}
			a.EffectWithoutReceipt = append(a.EffectWithoutReceipt, fmt.Sprintf("refund %s (%s %d) applied at the provider, receipt %s", rf.Key, args.OrderID, args.Amount, state))
		}
	}
	appliedKeys := map[string]bool{}
	for _, rf := range prov.Refunds() {
		if rf.Applied {
			appliedKeys[rf.Key] = true
		}
	}
	for id, at := range rep.Attempts {
		if at.State == kernel.StateCommitted {
			a.Committed++
			if !appliedKeys[id] {
				a.ReceiptWithoutEffect = append(a.ReceiptWithoutEffect, fmt.Sprintf("attempt %s committed on %s, the provider applied nothing", id, at.Resource))
			}
		}
	}
	orders := map[string]bool{}
	for o := range applied {
		orders[o] = true
	}
	for _, ls := range rep.Ledgers {
		if ls.Tenant == tenant && ls.Ledger.GuaranteeID == guaranteeID {
			orders[ls.Ledger.Resource] = true
		}
	}
	for o := range orders {
		if applied[o] > limit {
			a.OverCeiling = append(a.OverCeiling, fmt.Sprintf("%s refunded %d at the provider, ceiling %d", o, applied[o], limit))
		}
		var committed int64
		if l := rep.Ledger(tenant, guaranteeID, o); l != nil {
			committed = l.Committed
		}
		if committed != applied[o] {
			a.Mismatch = append(a.Mismatch, fmt.Sprintf("%s: provider applied %d, ledger committed %d", o, applied[o], committed))
		}
	}
	for _, k := range acks {
		subject, ok := rep.OperationIDs[k.OperationID]
		if !ok {
			a.AcksLost = append(a.AcksLost, fmt.Sprintf("operation %s (%s) acknowledged, not in the stream", k.OperationID, k.Status))
			continue
		}
		op := rep.Operations[subject]
		if k.Status == lincheck.StatusRefused {
			if k.Code == lincheck.CodeExceeded && (op.Refusal == nil || string(op.Refusal.Code) != k.Code) {
				a.AcksLost = append(a.AcksLost, fmt.Sprintf("operation %s acknowledged refused %s, the stream has no such refusal", k.OperationID, k.Code))
			}
			continue
		}
		at, ok := rep.Attempts[k.AttemptID]
		if k.AttemptID == "" || !ok || at.Resource == "" {
			a.AcksLost = append(a.AcksLost, fmt.Sprintf("attempt %s (%s) acknowledged, no reservation in the stream", k.AttemptID, k.Status))
			continue
		}
		switch {
		case k.Status == lincheck.StatusApplied && at.State != kernel.StateCommitted:
			a.AcksLost = append(a.AcksLost, fmt.Sprintf("attempt %s acknowledged applied, receipt %s", k.AttemptID, at.State))
		case k.Status == lincheck.StatusNotApplied && at.State != kernel.StateReleased:
			a.AcksLost = append(a.AcksLost, fmt.Sprintf("attempt %s acknowledged not_applied, receipt %s", k.AttemptID, at.State))
		case (k.Status == lincheck.StatusPending || k.Status == lincheck.StatusUnknown) && at.State == 0:
			a.AcksLost = append(a.AcksLost, fmt.Sprintf("attempt %s acknowledged %s, no receipt", k.AttemptID, k.Status))
		}
	}
	for _, l := range [][]string{a.EffectWithoutReceipt, a.ReceiptWithoutEffect, a.OverCeiling, a.Mismatch, a.AcksLost} {
		sort.Strings(l)
	}
	return a
}
