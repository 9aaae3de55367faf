package mcpgw

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestTokenClientFollowsNoRedirect: the bearer token goes to the endpoint
// it was given for; a redirect to another loopback server is returned as
// it is and that server never sees a request (nor the token).
func TestTokenClientFollowsNoRedirect(t *testing.T) {
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	resp, err := TokenClient("a-token-0123456789abcdef01").Post(redirector.URL+Path, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("status %s, want the redirect itself", resp.Status)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the redirect target saw %d requests", n)
	}
}
