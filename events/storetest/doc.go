// Package storetest is the conformance suite of events.Store: every store
// implementation (JetStream, memory) must pass Run.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) events.Store { return newMyStore(t) })
//	}
package storetest
