// Package interop holds this project's interoperability tests: what the
// audit log publishes (C2SP tlog-checkpoint notes, tlog-cosignature
// cosignatures, RFC 6962 inclusion and consistency proofs) read and
// checked by implementations nobody on this project wrote:
// github.com/transparency-dev/formats (checkpoint bodies and cosignature/v1
// verification), github.com/transparency-dev/merkle (RFC 6962 leaf hashes,
// roots, inclusion and consistency proofs) and sigsum.org/sigsum-go (the
// checkpoint, the log's Ed25519 note signature and key ID, cosignature
// lines, all with its own parser and no golang.org/x/mod), and
// filippo.io/torchwood's litewitness, a third-party C2SP tlog-witness, run
// as a process that cosigns a running daemon's log over HTTP.
//
// BuildLitewitness and StartLitewitness are the tools for the latter:
// litewitness and witnessctl are pinned by the module in ./litewitness, a
// module of its own so that torchwood's requirements stay out of the
// ledger's go.mod, and run with their key in a dedicated ssh-agent. The
// test that runs them against a daemon is in package daemon
// (TestLitewitnessCosignsTheLog), beside the daemon's own fixtures.
package interop
