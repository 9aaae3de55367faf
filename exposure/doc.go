// Package exposure holds the view.json format, a tenant's exposure view:
// every resource ledger's balances (kernel.Ledger.Balance) and open
// attempts, and the incidents, as of one stream sequence. The live read
// model (package projections) builds and exports it; the offline verifier
// recomputes it from events.jsonl and compares. Both build its entries
// with the functions here (ResourceOf, IncidentOf, SortResources), so the
// two views cannot drift apart.
//
// MarshalView writes the one canonical form (indented JSON, fields in
// struct order); ParseView is strict (unknown fields, trailing data and any
// form but MarshalView's are refused) and never panics:
//
//	v := exposure.View{V: exposure.ViewVersion, Tenant: t, Seq: seq}
//	v.Resources = append(v.Resources, exposure.ResourceOf(subject, ledger))
//	exposure.SortResources(v.Resources)
//	b, err := exposure.MarshalView(v)
//	back, err := exposure.ParseView(b)
package exposure
