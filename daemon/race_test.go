//go:build race

package daemon

// raceEnabled reports a build with the race detector.
const raceEnabled = true
