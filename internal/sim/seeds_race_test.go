//go:build race

package sim

// defaultSeeds is lower under the race detector, which slows the
// simulation about tenfold; the plain run covers the full count.
const defaultSeeds = 1000
