// Package testenv is what the tests of every package share: a real embedded
// nats-server with JetStream on a loopback port, connections to it, the
// event stream, and Eventually, which waits for a condition instead of
// sleeping. Everything it starts is stopped at the end of the test.
//
//	srv := testenv.Server(t, testenv.Options{})
//	nc, js := testenv.Connect(t, srv.ClientURL())
//	store := testenv.Store(t, js)
//	testenv.Eventually(t, func() bool { return view.Seq() == last }, 10*time.Second, "the view to catch up")
package testenv
