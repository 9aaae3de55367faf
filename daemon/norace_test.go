//go:build !race

package daemon_test

// raceEnabled reports a build with the race detector (race_test.go).
const raceEnabled = false
