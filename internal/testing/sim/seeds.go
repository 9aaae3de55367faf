package sim

import "sync"

// RunSeeds runs n seeds from base on workers goroutines (each run is
// deterministic on its own: runs share nothing) and returns their results
// in seed order, each without its trace unless it failed. It stops
// starting seeds after the first failure that known does not excuse (nil:
// none).
func RunSeeds(base uint64, n, workers int, opts func(seed uint64) Options, known func(seed uint64) bool) []Result {
	out := make([]Result, n)
	var mu sync.Mutex
	next, failed := 0, false
	var wg sync.WaitGroup
	for w := 0; w < max(1, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := failed || i >= n
				mu.Unlock()
				if stop {
					return
				}
				r := Run(opts(base + uint64(i)))
				if r.Failure == nil {
					r.Trace = nil
				}
				mu.Lock()
				out[i] = r
				failed = failed || r.Failure != nil && (known == nil || !known(r.Seed))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var done []Result
	for _, r := range out {
		if r.Seed != 0 {
			done = append(done, r)
		}
	}
	return done
}
