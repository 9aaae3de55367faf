// Package gatewaytest connects to a runtime as one of a tenant's principals
// and sends it proposals, for the tests of the packages around the gateway
// (the daemon, the console).
package gatewaytest
