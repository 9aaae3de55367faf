package config

import (
	"strings"
	"testing"
	"time"
)

// TestOwnershipConfig: [nats.ownership] takes its defaults, is refused with
// the embedded server, and refuses a TTL a late heartbeat could pass and
// out-of-range partitions, each error naming its key.
func TestOwnershipConfig(t *testing.T) {
	const external = "[nats]\nurl = \"nats://127.0.0.1:4222\"\nuser = \"contextosd\"\npassword = \"a-password-of-16-bytes\"\n\n[runtime]\nkey_file = \"k\"\n\n"
	const embedded = "[nats]\ndata_dir = \"d\"\n\n"
	const tenants = "[[tenants]]\nid = \"t\"\n"
	for _, c := range []struct {
		name, text, err string
	}{
		{"off by default on the embedded server", embedded + tenants, ""},
		{"defaults", external + "[nats.ownership]\nenabled = true\n\n" + tenants, ""},
		{"embedded", strings.Replace(embedded, "\n\n", "\n\n[nats.ownership]\nenabled = true\n\n", 1) + tenants, "nats.ownership is for replicas on an external deployment"},
		{"ttl under two heartbeats", external + "[nats.ownership]\nenabled = true\nttl = \"1s\"\nheartbeat = \"600ms\"\n\n" + tenants, "nats.ownership.ttl"},
		{"heartbeat too short", external + "[nats.ownership]\nenabled = true\nheartbeat = \"10ms\"\n\n" + tenants, "nats.ownership.heartbeat"},
		{"too many partitions", external + "[nats.ownership]\nenabled = true\npartitions = 5000\n\n" + tenants, "nats.ownership.partitions"},
		{"one partition", external + "[nats.ownership]\nenabled = true\npartitions = 1\n\n" + tenants, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.text))
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				o := cfg.NATS.Ownership
				if o.Partitions == 0 || o.TTL.Duration != DefaultOwnershipTTL || o.Heartbeat.Duration != time.Second {
					t.Fatalf("defaults not applied: %+v", o)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want one naming %q", err, c.err)
			}
		})
	}
}
