package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/contextos/ledger/kernel"
)

const scopesBase = `
[nats]
data_dir = "/tmp/unused"

[[tenants]]
id = "acme"
%TENANT%

  [[tenants.operators]]
  id = "ops_all"
  password = "all-secret-all-secret"

  [[tenants.operators]]
  id = "ops_ro"
  password = "ro-secret-ro-secret"
  %SCOPES%
`

func scopesConfig(tenant, scopes string) string {
	return strings.NewReplacer("%TENANT%", tenant, "%SCOPES%", scopes).Replace(scopesBase)
}

// TestOperatorScopes: a scopes list is read as given; no list means every
// scope; an empty or unknown scope and an unknown two-person action are
// refused at --check-config.
func TestOperatorScopes(t *testing.T) {
	c, err := Parse([]byte(scopesConfig(`two_person = ["assert_absence", "limit_raise"]
limit_raise_above = 50000`, `scopes = ["read", "kill_switch"]`)))
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := c.Tenant("acme")
	if got := tc.OperatorScopes("ops_all"); got != nil {
		t.Errorf("operator without scopes: %v, want nil (every scope)", got)
	}
	if got := tc.OperatorScopes("ops_ro"); !slices.Equal(got, []kernel.Scope{kernel.ScopeRead, kernel.ScopeKillSwitch}) {
		t.Errorf("ops_ro scopes %v", got)
	}
	if p := tc.OperatorPolicy(); !slices.Equal(p.TwoPerson, []string{"assert_absence", "limit_raise"}) || p.LimitRaiseAbove != 50000 {
		t.Errorf("policy %+v", p)
	}
	for _, tc := range []struct{ name, tenant, scopes, want string }{
		{"empty scopes", "", `scopes = []`, "scopes is empty"},
		{"unknown scope", "", `scopes = ["read", "admin"]`, `unknown scope "admin"`},
		{"unknown two-person action", `two_person = ["kill_switch"]`, "", `unknown action "kill_switch"`},
		{"negative threshold", `limit_raise_above = -1`, "", "limit_raise_above"},
	} {
		if _, err := Parse([]byte(scopesConfig(tc.tenant, tc.scopes))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", tc.name, err, tc.want)
		}
	}
}
