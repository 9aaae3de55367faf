// Package casegen writes the decision cases of `ctx context eval`: cases
// converted from RAMDocs (ramdocs.go) and hand-written adversarially
// plausible conflicts (adversarial.go). Each case is written once, as
// labels, and build derives the compiler's inputs from them by one fixed
// encoding; the grader then reads the labels and the compiler the inputs.
// cmd/ctxcases runs it:
//
//	go run ./cmd/ctxcases -ramdocs ../shared/data/ramdocs/RAMDocs_test.jsonl -out testdata/context-eval
package casegen
