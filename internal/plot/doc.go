// Package plot holds the drawing primitives the repository's PNG charts
// share (the benchmark chart, internal/bench; the context evaluation's
// frontier, internal/contexteval): text in the fixed 7x13 face of
// golang.org/x/image, lines, dots and axis steps. No plotting dependency:
// a chart is a few dozen lines over these.
package plot
