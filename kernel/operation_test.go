package kernel

import (
	"testing"

	"github.com/contextos/ledger/wire"
)

// TestDecideOpenKeyOwnership: an operation key belongs to the principal
// that opened it, and a refusal before any reservation claims nothing.
func TestDecideOpenKeyOwnership(t *testing.T) {
	opened := func(principal, digest string) OperationOpened {
		return OperationOpened{OperationID: "op_" + principal + digest, Principal: principal, RunID: "run_1", OperationKey: "k",
			CapabilityID: "cap", ActionDigest: digest, Executor: "x"}
	}
	fold := func(evs ...Event) *Operation {
		o := &Operation{}
		for _, ev := range evs {
			if err := o.Apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		return o
	}
	refused := OperationRefused{Code: wire.CodeAuthorityDenied, Reason: "no grant"}
	reserved := OperationReserved{AttemptID: "a1", Generation: 1}
	for _, tc := range []struct {
		name     string
		op       *Operation
		proposal OperationOpened
		want     OpenResult
		code     wire.Code
	}{
		{"new key", fold(), opened("alice", "d1"), OpenNew, ""},
		{"resend of an accepted operation", fold(opened("alice", "d1"), reserved), opened("alice", "d1"), OpenExisting, ""},
		{"resend of a refused operation", fold(opened("alice", "d1"), refused), opened("alice", "d1"), OpenExisting, ""},
		{"another action on an accepted key", fold(opened("alice", "d1"), reserved), opened("alice", "d2"), 0, wire.CodeOperationConflict},
		{"another action after a refusal", fold(opened("alice", "d1"), refused), opened("alice", "d2"), OpenNew, ""},
		{"another principal after a refusal", fold(opened("mallory", "d9"), refused), opened("alice", "d1"), OpenNew, ""},
		{"another principal's accepted key", fold(opened("bob", "d1"), reserved), opened("alice", "d1"), OpenScoped, ""},
		{"another principal's key opened, not yet decided", fold(opened("bob", "d1")), opened("alice", "d1"), OpenScoped, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, d := DecideOpen(tc.op, tc.proposal)
			var code wire.Code
			if d.Refusal != nil {
				code = d.Refusal.Code
			}
			if kind != tc.want || code != tc.code {
				t.Fatalf("got %d %q, want %d %q", kind, code, tc.want, tc.code)
			}
			if kind == OpenNew {
				// The decided events fold onto the operation: a refused key
				// is opened afresh, replacing the refused operation.
				for _, ev := range d.Events {
					if err := tc.op.Apply(ev); err != nil {
						t.Fatalf("fold the reopening: %v", err)
					}
				}
				if tc.op.Principal != tc.proposal.Principal || tc.op.Refusal != nil || tc.op.ActionDigest != tc.proposal.ActionDigest {
					t.Fatalf("reopened operation: %+v", tc.op)
				}
			}
		})
	}
	// An operation that claims its key is never opened twice.
	if err := fold(opened("alice", "d1"), reserved).Apply(opened("alice", "d2")); err == nil {
		t.Fatal("a claimed operation was opened twice")
	}
}
