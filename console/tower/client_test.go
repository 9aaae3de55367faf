package tower

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/client"
	"github.com/contextos/ledger/console"
)

// browser is an operator's browser without the browser: a cookie jar.
type browser struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func newClient(t testing.TB, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 60 * time.Second}}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

func csrfOf(t testing.TB, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	return m[1]
}

func (c *browser) get(path string) (int, string) {
	c.t.Helper()
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (c *browser) post(path string, form url.Values) (int, string) {
	c.t.Helper()
	resp, err := c.hc.PostForm(c.base+path, form)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tryLogin posts the login form of a fresh page with a password.
func (c *browser) tryLogin(tenant, operator, password string) (int, string) {
	c.t.Helper()
	_, page := c.get("/")
	return c.post("/login", url.Values{"csrf": {csrfOf(c.t, page)}, "tenant": {tenant}, "operator": {operator}, "password": {password}})
}

// login logs in from the login form and returns the fleet page.
func (c *browser) login(tenant, operator string) string {
	c.t.Helper()
	status, page := c.tryLogin(tenant, operator, passwords[tenant+"."+operator])
	if status != http.StatusOK || !strings.Contains(page, `<tr data-login="`+tenant+`"><td>`+tenant+`</td><td class="operator">`+operator+`<`) {
		c.t.Fatalf("login %s/%s: %d\n%s", tenant, operator, status, page)
	}
	return page
}

// addLogin logs the session into another tenant from the fleet page.
func (c *browser) addLogin(page, tenant, operator string) string {
	c.t.Helper()
	status, page := c.post("/login", url.Values{"csrf": {csrfOf(c.t, page)}, "tenant": {tenant}, "operator": {operator},
		"password": {passwords[tenant+"."+operator]}})
	if status != http.StatusOK || !strings.Contains(page, `<tr data-login="`+tenant+`">`) {
		c.t.Fatalf("add login %s/%s: %d\n%s", tenant, operator, status, page)
	}
	return page
}

// lastKill waits for the runtime's verified audit log of tenant to record a
// kill switch change that satisfies cond, and returns it: who, when and
// why, as the runtime signed it.
func (r *runtime) lastKill(tenant string, cond func(*console.KillChange) bool) *console.KillChange {
	r.t.Helper()
	op := map[string]string{"acme": "ops_alice", "globex": "ops_bob"}[tenant]
	oc := &client.AuditClient{NC: r.conn(tenant, op), Tenant: tenant, Operator: op}
	deadline := time.Now().Add(15 * time.Second)
	for {
		e, err := exportEntries(context.Background(), oc)
		if err != nil {
			r.t.Fatal(err)
		}
		last := console.LastKillSwitch(e)
		if last != nil && cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s's audit log records no such kill switch change; the last is %+v", tenant, last)
		}
		time.Sleep(50 * time.Millisecond) // the audit projector records events shortly after they are appended
	}
}
