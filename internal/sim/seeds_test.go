//go:build !race

package sim

// defaultSeeds is the seed count of a plain go test run (CI).
const defaultSeeds = 10000
