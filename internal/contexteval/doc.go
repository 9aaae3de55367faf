// Package contexteval runs the evaluation protocol of proof-carrying
// context on decision cases (internal/evalcase): the kernel's compiler
// decides each case from its inputs, the grader (internal/grader) from its
// labels, and the report counts where they part:
//
//   - a false closure: the gate allowed a commit the grader says must not
//     happen;
//   - a false abstention: the gate kept open a decision the grader would
//     close;
//   - coverage: the share of cases the gate lets commit;
//   - accuracy: the share of commits whose basis (every ref the gate counts
//     as satisfying an obligation) is labelled correct in the source
//     dataset. Neither the compiler nor the grader reads that label.
//
// The same cases run through weaker gates (Levels) to draw the
// accuracy-coverage frontier, by the risk class of the action.
//
//	cases, _ := evalcase.Load(dir)
//	rep, err := contexteval.Run(cases, contexteval.Options{})
//	fmt.Print(rep.Markdown("context-eval.png"))
package contexteval
