//go:build !race

package sim

// defaultSeeds is the seed count of a plain go test run (about 25 ms of
// CPU a seed, on every core).
const defaultSeeds = 10000
