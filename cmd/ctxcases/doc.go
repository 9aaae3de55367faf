// Command ctxcases writes the decision cases `ctx context eval` runs: the
// RAMDocs conversion (internal/casegen.FromRAMDocs, over the stated subset
// of the test split) and the hand-written adversarial slice. The output is
// deterministic; the committed cases are its output, and
// internal/casegen's tests check that they still are.
//
//	go run ./cmd/ctxcases -ramdocs ../shared/data/ramdocs/RAMDocs_test.jsonl -out testdata/context-eval
package main
