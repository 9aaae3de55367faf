// Package evalcase holds the decision cases that `ctx context eval` runs:
// one JSON file per case (docs/schema/context-eval-case.json), each with two
// views of one decision. The labels (decision, snapshots, resolution
// policy, resolution) state what is true of the case in plain terms, for
// the grader; the inputs (pack, run, evidence, markers) are what the
// compiler under test receives. The package does not import the kernel, so
// the grader, which reads only labels, cannot reach the compiler through it.
//
//	cases, err := evalcase.Load("testdata/context-eval") // every *.json below, by path
//	for _, c := range cases { verdict := grader.Grade(c); ... }
package evalcase
