package console

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestSessionsPerTenant: the session table bounds logins per tenant and
// evicts only the tenant's least recently used login; a fleet session
// losing one tenant's login keeps its others; idle sessions end; login
// buckets are per configured tenant, and unknown names share one that
// never grows the table.
func TestSessionsPerTenant(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ss := NewSessions[*struct{}](Limits{Tenants: []string{"acme", "globex"}, PerTenant: 2, Idle: time.Minute, Now: func() time.Time { return now }})
	login := func(tenant string) *Login {
		return &Login{Tenant: tenant, Operator: "op", Conns: map[string]*nats.Conn{}}
	}
	open := func(tenant string) string {
		t.Helper()
		s, err := ss.Open(login(tenant), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	alive := func(id string, want bool, tenants ...string) {
		t.Helper()
		s, ok := ss.Get(id)
		if ok != want {
			t.Fatalf("session alive %v, want %v", ok, want)
		}
		if !ok {
			return
		}
		var got []string
		for _, l := range s.Logins() {
			got = append(got, l.Tenant)
		}
		if fmt.Sprint(got) != fmt.Sprint(tenants) {
			t.Fatalf("session logged into %v, want %v", got, tenants)
		}
	}
	a1, a2, g1 := open("acme"), open("acme"), open("globex")
	a3 := open("acme")
	alive(a1, false)
	alive(g1, true, "globex")
	alive(a2, true, "acme") // a2 is now acme's most recently used
	if _, err := ss.Open(login("initech"), nil); !errors.Is(err, ErrUnknownTenant) {
		t.Fatalf("a session of an unknown tenant: %v", err)
	}

	fleet := open("globex")
	if err := ss.AddLogin(fleet, login("acme")); err != nil {
		t.Fatal(err)
	}
	alive(a3, false) // acme's least recently used
	alive(fleet, true, "acme", "globex")
	open("acme") // ends a2
	alive(a2, false)
	open("acme") // ends the fleet session's acme login, not the session
	alive(fleet, true, "globex")
	if n, a, g := ss.Count(), ss.TenantCount("acme"), ss.TenantCount("globex"); n != 4 || a != 2 || g != 2 {
		t.Fatalf("%d sessions, %d of acme, %d of globex", n, a, g)
	}
	ss.EndLogin(fleet, "globex")
	alive(fleet, false)

	now = now.Add(2 * time.Minute)
	alive(g1, false)
	ss.Sweep()
	if n := ss.Count(); n != 0 {
		t.Fatalf("%d sessions after the idle time", n)
	}

	for i := range 10 {
		if err := ss.Admit("acme"); err != nil {
			t.Fatalf("acme's login %d: %v", i, err)
		}
	}
	if err := ss.Admit("acme"); !errors.Is(err, ErrTooManyLogins) {
		t.Fatalf("acme's 11th login at one instant: %v", err)
	}
	if err := ss.Admit("globex"); err != nil {
		t.Fatalf("globex after acme's bucket ran dry: %v", err)
	}
	for i := range 10_000 {
		if err := ss.Admit(fmt.Sprintf("t%d", i)); err == nil {
			t.Fatal("an unknown tenant admitted")
		}
	}
	if len(ss.buckets) != 2 || len(ss.lru) != 2 {
		t.Fatalf("unknown names grew the table: %d buckets, %d lists", len(ss.buckets), len(ss.lru))
	}
	if err := ss.Admit("globex"); err != nil {
		t.Fatalf("globex after a flood of unknown names: %v", err)
	}
}
