//go:build race

package sim

// defaultSeeds is lower under the race detector, which makes a run about
// nine times slower (about 0.2 s of CPU a seed): make test runs the package
// with -race, so this is the count it runs; the plain go test covers the
// full count.
const defaultSeeds = 200
