// Command gen writes what clients and documents repeat of the wire
// contract, from the wire package itself: the code lists of the Go client
// (client/codes.go), of the JSON Schemas (docs/schema/common.json), of the
// Python client (clients/python/contextos_ledger/errors.py) and of the
// TypeScript client (clients/typescript/src/errors.ts and the CODES and
// MEMBERS of src/wire.ts, whose compile-time checks then hold its
// interfaces to the wire structs). Run it after changing a code or a
// message:
//
//	go generate ./wire
//
// TestGenerated fails while a file differs from what it writes.
package main
