// Package schema holds the JSON Schemas of the ctx.v1 wire contract
// (docs/wire.md) and the tests that hold a running daemon to them.
package schema
