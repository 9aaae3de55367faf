// Command contextosd is the ContextOS ledger runtime: it embeds (or joins) a
// NATS JetStream deployment and serves governed proposals and operator verbs.
//
//	contextosd --config FILE
//	contextosd --check-config FILE [--offline]
//	contextosd --init-key FILE
//	contextosd --version
//	contextosd keys rotate --config FILE
//	contextosd hash-password [--cost N] < password
package main
