package kernel

import "github.com/contextos/ledger/wire"

// CheckStoreSpace refuses a new proposal overloaded when the store may grow
// by fewer than min bytes (free, as the runtime last measured its volume and
// its streams' and account's limits): a full store stops every tenant, so
// new work stops first, while settlements, observations and operator verbs,
// which finish what was started, go on. Nothing is stored for the refusal.
func CheckStoreSpace(free, min uint64) *Refusal {
	if free >= min {
		return nil
	}
	return refuse(wire.CodeOverloaded, "the store has %d bytes free, below runtime.min_free_bytes %d: no new proposal is taken until space is freed; nothing was stored, retry later", free, min)
}
