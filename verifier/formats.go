package verifier

import (
	"crypto/ed25519"
	"io"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/exposure"
	"github.com/contextos/ledger/kernel"
)

// The files an auditor reads are defined where their writer and this
// package both find them: the log's export, proofs, keys.json and
// events.jsonl in package audit, view.json in package exposure. The names
// below keep this package the one an auditor needs; each is the same type
// or function, not a copy.

// The versions of the file formats.
const (
	EntriesVersion     = audit.EntriesVersion
	ProofVersion       = audit.ProofVersion
	ConsistencyVersion = audit.ConsistencyVersion
	KeysVersion        = audit.KeysVersion
	ViewVersion        = exposure.ViewVersion
)

type (
	// Entries is audit.Entries, the entries.json export.
	Entries = audit.Entries
	// Proof is audit.Proof, proof.json.
	Proof = audit.Proof
	// Consistency is audit.Consistency, consistency.json.
	Consistency = audit.Consistency
	// Keys is audit.Keys, keys.json.
	Keys = audit.Keys
	// EventLine is audit.EventLine, one line of events.jsonl.
	EventLine = audit.EventLine
	// View is exposure.View, view.json.
	View = exposure.View
	// ResourceView is exposure.ResourceView.
	ResourceView = exposure.ResourceView
	// OpenAttempt is exposure.OpenAttempt.
	OpenAttempt = exposure.OpenAttempt
	// Incident is exposure.Incident.
	Incident = exposure.Incident
)

// The next safe step of an open attempt, by state (kernel.NextSafeStep).
const (
	NextStepReserved = exposure.NextStepReserved
	NextStepStarted  = exposure.NextStepStarted
	NextStepHeld     = exposure.NextStepHeld
)

// IncidentCodes is exposure.IncidentCodes.
var IncidentCodes = exposure.IncidentCodes

// MarshalEntries is audit.MarshalEntries.
func MarshalEntries(e Entries) ([]byte, error) { return audit.MarshalEntries(e) }

// ParseEntries is audit.ParseEntries.
func ParseEntries(b []byte) (Entries, error) { return audit.ParseEntries(b) }

// MarshalProof is audit.MarshalProof.
func MarshalProof(p Proof) ([]byte, error) { return audit.MarshalProof(p) }

// ParseProof is audit.ParseProof.
func ParseProof(b []byte) (Proof, error) { return audit.ParseProof(b) }

// MarshalConsistency is audit.MarshalConsistency.
func MarshalConsistency(c Consistency) ([]byte, error) { return audit.MarshalConsistency(c) }

// ParseConsistency is audit.ParseConsistency.
func ParseConsistency(b []byte) (Consistency, error) { return audit.ParseConsistency(b) }

// KeysFor is audit.KeysFor.
func KeysFor(tenant string, pubs ...ed25519.PublicKey) (Keys, error) {
	return audit.KeysFor(tenant, pubs...)
}

// MarshalKeys is audit.MarshalKeys.
func MarshalKeys(k Keys) ([]byte, error) { return audit.MarshalKeys(k) }

// ParseKeys is audit.ParseKeys.
func ParseKeys(b []byte) (Keys, error) { return audit.ParseKeys(b) }

// MarshalEventLine is audit.MarshalEventLine.
func MarshalEventLine(seq uint64, subject string, raw []byte) ([]byte, error) {
	return audit.MarshalEventLine(seq, subject, raw)
}

// ParseEventLine is audit.ParseEventLine.
func ParseEventLine(line []byte) (EventLine, error) { return audit.ParseEventLine(line) }

// ReadEvents is audit.ReadEvents.
func ReadEvents(r io.Reader, fn func(EventLine) error) error { return audit.ReadEvents(r, fn) }

// MarshalView is exposure.MarshalView.
func MarshalView(v View) ([]byte, error) { return exposure.MarshalView(v) }

// ParseView is exposure.ParseView.
func ParseView(b []byte) (View, error) { return exposure.ParseView(b) }

// NextStep is exposure.NextStep.
func NextStep(s kernel.ReceiptState) string { return exposure.NextStep(s) }
