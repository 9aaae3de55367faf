// Command ctx is the operator and auditor CLI of the ContextOS ledger.
//
// Exit codes, whatever the output format: 0 ok, 1 refused or invalid, 2
// usage, 3 contextosd unreachable.
package main
