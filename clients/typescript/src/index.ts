// contextos-ledger: the TypeScript client of the ContextOS ledger (ctx.v1,
// docs/wire.md), on @nats-io/transport-node.
export * from "./wire.js";
export * from "./errors.js";
export * from "./client.js";
export { InsecureTransport, type ReconnectOptions, type TLSOptions, type TransportOptions } from "./connection.js";
