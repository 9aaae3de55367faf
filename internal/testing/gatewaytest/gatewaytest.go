package gatewaytest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats.go"
)

// Connect connects to url as principal of tenant, with the inbox prefix the
// runtime's permissions give that principal; the connection is closed when
// the test ends.
func Connect(t testing.TB, url, password, tenant, principal string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.UserInfo(wire.UserName(tenant, principal), password),
		nats.CustomInboxPrefix(wire.InboxPrefix(tenant, principal))}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Propose sends body, encoded as JSON, as principal's proposal on nc and
// returns the runtime's reply.
func Propose(t testing.TB, nc *nats.Conn, tenant, principal string, body any) wire.Reply {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(wire.ProposeSubject(tenant, principal), b, 10*time.Second)
	if err != nil {
		t.Fatalf("propose: %v", err)
	}
	var r wire.Reply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}
