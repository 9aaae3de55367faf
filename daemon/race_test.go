//go:build race

package daemon_test

// raceEnabled reports a build with the race detector.
const raceEnabled = true
