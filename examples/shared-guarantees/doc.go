// Command shared-guarantees tells the seed story end to end with real
// processes: contextosd on its embedded NATS, the synthetic payment provider
// on loopback, agents with their own NATS credentials, and an operator using
// ctx. It asserts every balance and the provider's call counts and exits
// non-zero if anything differs.
package main
