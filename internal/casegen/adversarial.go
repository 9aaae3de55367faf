package casegen

import (
	"time"

	"github.com/contextos/ledger/internal/evalcase"
)

// The adversarial slice: conflicts between two sources that are both
// fluent, recent, verified and internally consistent, written by hand. No
// wording, position or recency tells the true one apart; only a declared
// resolution may. Obvious nonsense would only prove that a gate rejects
// obvious nonsense.

const (
	advAgent    = "agent_ops"
	advReviewer = "ops_lead"
)

// snap is a current, trusted, in-budget snapshot observed ago before the
// decision.
func snap(ref, source string, ago time.Duration, claim, answer string, truth evalcase.Truth, content string) Snap {
	s := Snap{Content: content, Snapshot: evalcase.Snapshot{
		Ref: ref, Source: source, ObservedAt: DecisionTime.Add(-ago), Truth: truth,
		Current: true, Trusted: true, InBudget: true,
	}}
	if claim != "" {
		s.Claims, s.Answer = []string{claim}, answer
	}
	return s
}

func inFamily(s Snap, family string) Snap { s.Family = family; return s }

// Adversarial returns the hand-written cases.
func Adversarial() ([]evalcase.Case, error) {
	const (
		C = evalcase.TruthCorrect
		M = evalcase.TruthMisinfo
	)
	none := evalcase.ResolutionPolicy{Kind: evalcase.KindNone}
	review := evalcase.ResolutionPolicy{Kind: evalcase.KindAccountableReview}
	prov := func(note string) evalcase.Provenance {
		return evalcase.Provenance{Dataset: "hand-written", Note: note}
	}

	// Refund: the seed's order identity conflict.
	refund := evalcase.Decision{DecisionKey: "support.refund.execute", Obligations: []evalcase.Obligation{
		{Requirement: "order_lookup"}, {Requirement: "policy.eval"}, {Requirement: "identity_verified"}}}
	kg := snap("kg:order:ord_881#snapshot_41", "kg", 10*time.Minute, "order_lookup", "ord_881", C,
		"Order ord_881 (customer c_77): canonical order id ord_881, amount INR 800, status delivered on 2026-10-22, no merge recorded.")
	crm := snap("crm:order:ord_881#snapshot_19", "crm", 5*time.Minute, "order_lookup", "ord_992", M,
		"Order ord_881 (customer c_77) was merged into ord_992 on 2026-10-24 after a duplicate checkout; canonical order id ord_992, amount INR 800.")
	crmAgrees := snap("crm:order:ord_881#snapshot_20", "crm", 5*time.Minute, "order_lookup", "ord_881", C,
		"Order ord_881 (customer c_77): canonical order id ord_881, amount INR 800, delivered 2026-10-22; no duplicate checkout on file.")
	policy := snap("policy:refunds#v7", "policy_store", 72*time.Hour, "policy.eval", "refund<=1000", C,
		"Refunds up to INR 1000 per order are allowed for delivered orders within 30 days of delivery.")
	idp := snap("idp:customer:c_77#session_9", "idp", 20*time.Minute, "identity_verified", "c_77", C,
		"Customer c_77 verified by one-time passcode to the registered phone at 11:40.")
	refundSpec := func(id, variant string, snaps []Snap, p evalcase.ResolutionPolicy, r *evalcase.Resolution, note string) Spec {
		return Spec{CaseID: "adversarial/" + id, Slice: "adversarial", Variant: variant, Risk: evalcase.RiskHigh,
			Provenance: prov(note), Agent: advAgent, Decision: refund, Snaps: snaps, Policy: p, Resolution: r,
			Subject: "order:ord_881", Predicate: "canonical_order_id"}
	}

	// Vendor bank account: an ERP master record and a vendor portal notice,
	// both signed off, both this week.
	bank := evalcase.Decision{DecisionKey: "ap.payment.release", Obligations: []evalcase.Obligation{{Requirement: "vendor_bank_account"}}}
	erp := snap("erp:vendor:v_310#rev_88", "erp", 30*time.Minute, "vendor_bank_account", "DE89370400440532013000", C,
		"Vendor v_310 (Kestrel Tooling GmbH) remit-to account DE89 3704 0044 0532 0130 00, confirmed by call-back to the number on the 2024 contract on 2026-10-26 10:55.")
	portal := snap("portal:vendor:v_310#msg_5521", "vendor_portal", 2*time.Hour, "vendor_bank_account", "GB33BUKB20201555555555", M,
		"Kestrel Tooling GmbH: following our treasury consolidation, please remit all open invoices to GB33 BUKB 2020 1555 5555 55 from today. Signed, M. Albrecht, CFO.")
	portalNewer := portal
	portalNewer.ObservedAt = DecisionTime.Add(-10 * time.Minute)
	refresh := evalcase.ResolutionPolicy{Kind: evalcase.KindAuthoritativeRefresh, SystemOfRecord: "erp"}
	bankSpec := func(id, variant string, snaps []Snap, p evalcase.ResolutionPolicy, r *evalcase.Resolution, note string) Spec {
		return Spec{CaseID: "adversarial/" + id, Slice: "adversarial", Variant: variant, Risk: evalcase.RiskHigh,
			Provenance: prov(note), Agent: advAgent, Decision: bank, Snaps: snaps, Policy: p, Resolution: r,
			Subject: "vendor:v_310", Predicate: "remit_to_account"}
	}

	// Refund limit: the published policy and a newer wiki page.
	limit := evalcase.Decision{DecisionKey: "support.refund.quote", Obligations: []evalcase.Obligation{{Requirement: "policy.eval"}}}
	wiki := snap("wiki:refund-policy#rev_12", "policy_wiki", 3*time.Hour, "policy.eval", "refund<=500", M,
		"Refund policy (effective 2026-10-01): agents may refund up to INR 500 per order; above that, escalate to a team lead.")
	priority := evalcase.ResolutionPolicy{Kind: evalcase.KindSourcePriority, SourceOrder: []string{"policy_store", "policy_wiki"}}
	limitSpec := func(id, variant string, snaps []Snap, p evalcase.ResolutionPolicy, note string) Spec {
		return Spec{CaseID: "adversarial/" + id, Slice: "adversarial", Variant: variant, Risk: evalcase.RiskMedium,
			Provenance: prov(note), Agent: advAgent, Decision: limit, Snaps: snaps, Policy: p,
			Subject: "policy:refunds", Predicate: "max_refund"}
	}

	// Access: is the employee still employed? Payroll is an export of the
	// HR core, so the two agree without being two witnesses.
	access := evalcase.Decision{DecisionKey: "iam.access.revoke", Obligations: []evalcase.Obligation{{Requirement: "employment_status", MinFamilies: 2}}}
	hr := inFamily(snap("hr:employee:e_4410#rec_7", "hr_core", 40*time.Minute, "employment_status", "terminated", C,
		"Employee e_4410 (R. Okafor): employment ended 2026-10-24, reason resignation, last working day recorded by HR business partner."), "hr_core")
	payroll := inFamily(snap("payroll:employee:e_4410#run_2026_10", "payroll", 35*time.Minute, "employment_status", "terminated", C,
		"Payroll run 2026-10: e_4410 final settlement computed, status terminated effective 2026-10-24."), "hr_core")
	badge := snap("badge:e_4410#log_991", "facilities", 25*time.Minute, "employment_status", "terminated", C,
		"Facilities: badge of e_4410 returned at reception 2026-10-24 17:05 and deactivated.")
	idpActive := snap("idp:user:e_4410#state", "idp", 15*time.Minute, "employment_status", "active", M,
		"Directory: user e_4410 active, last sign-in 2026-10-26 09:12 from a managed device, MFA satisfied.")
	accessSpec := func(id, variant string, snaps []Snap, note string) Spec {
		return Spec{CaseID: "adversarial/" + id, Slice: "adversarial", Variant: variant, Risk: evalcase.RiskHigh,
			Provenance: prov(note), Agent: advAgent, Decision: access, Snaps: snaps, Policy: none,
			Subject: "employee:e_4410", Predicate: "employment_status"}
	}

	// Shipping address: the order service and a CRM profile.
	ship := evalcase.Decision{DecisionKey: "support.reship", Obligations: []evalcase.Obligation{{Requirement: "shipping_address"}}}
	orders := snap("orders:ord_512#addr", "orders", 50*time.Minute, "shipping_address", "12 Lake Rd, Pune 411001", C,
		"Order ord_512 ships to 12 Lake Rd, Pune 411001 (address confirmed by the customer at checkout, 2026-10-25).")
	profile := snap("crm:customer:c_90#profile", "crm", 20*time.Minute, "shipping_address", "4 Hill St, Pune 411007", M,
		"Customer c_90 default address: 4 Hill St, Pune 411007, updated from the mobile app 2026-10-26 11:35.")
	profileStale := profile
	profileStale.Current, profileStale.ObservedAt = false, DecisionTime.Add(-20*24*time.Hour)
	shipSpec := func(id, variant string, snaps []Snap, p evalcase.ResolutionPolicy, r *evalcase.Resolution, note string) Spec {
		return Spec{CaseID: "adversarial/" + id, Slice: "adversarial", Variant: variant, Risk: evalcase.RiskMedium,
			Provenance: prov(note), Agent: advAgent, Decision: ship, Snaps: snaps, Policy: p, Resolution: r,
			Subject: "order:ord_512", Predicate: "ship_to"}
	}

	// Contract renewal: the contract system and a forwarded email.
	renew := evalcase.Decision{DecisionKey: "procurement.renewal.notice", Obligations: []evalcase.Obligation{{Requirement: "contract_state"}}}
	clm := snap("clm:contract:k_77#v3", "clm", 6*time.Hour, "contract_state", "terminates 2026-11-30", C,
		"Contract k_77 (Northwind analytics licence): notice of non-renewal served 2026-09-28; terminates 2026-11-30.")
	email := snap("mail:thread_88#msg_3", "mailbox", time.Hour, "contract_state", "renewed to 2027-11-30", M,
		"Fwd: Great news, Northwind confirmed the renewal of k_77 through 2027-11-30 at the same rate; countersigned copy to follow.")
	emailUntrusted := email
	emailUntrusted.Trusted = false
	renewSpec := func(id, variant string, snaps []Snap, note string) Spec {
		return Spec{CaseID: "adversarial/" + id, Slice: "adversarial", Variant: variant, Risk: evalcase.RiskLow,
			Provenance: prov(note), Agent: advAgent, Decision: renew, Snaps: snaps, Policy: none,
			Subject: "contract:k_77", Predicate: "state"}
	}

	specs := []Spec{
		refundSpec("refund-conflicting", "conflicting", []Snap{kg, crm, policy, idp}, none, nil,
			"the seed's ord_881/ord_992 conflict: both stores fresh and verified"),
		refundSpec("refund-resolved-review", "resolved", []Snap{kg, crm, policy, idp}, review,
			&evalcase.Resolution{By: advReviewer, Selects: []string{kg.Ref}}, "an accountable reviewer selects the order database"),
		refundSpec("refund-self-review", "resolved", []Snap{kg, crm, policy, idp}, review,
			&evalcase.Resolution{By: advAgent, Selects: []string{kg.Ref}}, "the agent resolves its own conflict: no resolution"),
		refundSpec("refund-control", "control", []Snap{kg, crmAgrees, policy, idp}, none, nil,
			"the same shape, the CRM agreeing"),
		bankSpec("bank-conflicting", "conflicting", []Snap{erp, portal}, none, nil,
			"a plausible change-of-bank notice against the vendor master"),
		bankSpec("bank-resolved-refresh", "resolved", []Snap{erp, portal}, refresh, nil,
			"the ERP, system of record, holds the newest observation"),
		bankSpec("bank-refresh-not-newest", "conflicting", []Snap{erp, portalNewer}, refresh, nil,
			"the notice is newer than the ERP record: the refresh rule does not decide"),
		limitSpec("limit-conflicting", "conflicting", []Snap{policy, wiki}, none,
			"the published policy against a newer, well-written wiki page"),
		limitSpec("limit-resolved-priority", "resolved", []Snap{policy, wiki}, priority,
			"the policy store outranks the wiki"),
		limitSpec("limit-control", "control", []Snap{policy}, none,
			"the published policy alone"),
		accessSpec("access-correlated", "correlated", []Snap{hr, payroll},
			"HR and its payroll export agree: one family, one witness"),
		accessSpec("access-sufficient", "sufficient", []Snap{hr, payroll, badge},
			"facilities is a second, independent family"),
		accessSpec("access-conflicting", "conflicting", []Snap{hr, badge, idpActive},
			"the directory still shows the account active"),
		shipSpec("ship-conflicting", "conflicting", []Snap{orders, profile}, none, nil,
			"a checkout address against a profile edited this morning"),
		shipSpec("ship-resolved-review", "resolved", []Snap{orders, profile}, review,
			&evalcase.Resolution{By: advReviewer, Selects: []string{orders.Ref}}, "the reviewer confirms the checkout address"),
		shipSpec("ship-stale", "stale", []Snap{orders, profileStale}, none, nil,
			"the contradicting profile has expired: the contradiction still blocks"),
		renewSpec("renew-conflicting", "conflicting", []Snap{clm, email},
			"a confident forwarded email against the contract system"),
		renewSpec("renew-untrusted", "untrusted", []Snap{emailUntrusted},
			"the mailbox is not trusted for contract state, and is all there is"),
	}
	out := make([]evalcase.Case, 0, len(specs))
	for _, s := range specs {
		c, err := Build(s)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
