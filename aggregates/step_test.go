package aggregates

import "github.com/contextos/ledger/kernel"

// funcStep is a step of the tests: decide is called with the loaded states
// each time the engine decides (a test may count the calls) and returns
// the events to append by key, and a refusal.
type funcStep struct {
	reads  kernel.Reads
	decide func(kernel.Loaded) (map[kernel.Key][]kernel.Event, *kernel.Refusal)
}

func (s funcStep) Reads() kernel.Reads { return s.reads }

func (s funcStep) Decide(l kernel.Loaded) kernel.Effects {
	evs, r := s.decide(l)
	return kernel.Effects{Append: evs, Refusal: r}
}

func (s funcStep) Contended(r *kernel.Refusal) kernel.Effects { return kernel.Effects{Refusal: r} }

// ledgerKey is the key of testDef's ledger of resource.
func ledgerKey(resource string) kernel.Key {
	return kernel.LedgerKey{GuaranteeID: testDef.ID, Resource: resource}.Key()
}

// exposureStep decides cmd on testDef's ledger of resource; seen, when not
// nil, is first told the ledger each decision is made on.
func exposureStep(resource string, cmd kernel.Command, seen func(*kernel.Ledger)) kernel.Step {
	k := ledgerKey(resource)
	return funcStep{reads: kernel.Reads{{Key: k, Access: kernel.Write}},
		decide: func(l kernel.Loaded) (map[kernel.Key][]kernel.Event, *kernel.Refusal) {
			led := l[k].(*kernel.Ledger)
			if seen != nil {
				seen(led)
			}
			d := kernel.DecideExposure(led, cmd)
			return map[kernel.Key][]kernel.Event{k: d.Events}, d.Refusal
		}}
}
