package witness

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TestWitnessClientFollowsNoRedirect: a witness URL that answers with a
// redirect to another (real, loopback) witness gets a refusal, and the
// checkpoint never reaches the other server.
func TestWitnessClientFollowsNoRedirect(t *testing.T) {
	real, c := serve(t, filepath.Join(t.TempDir(), "state.json"))
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		real.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(target.Close)
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+r.URL.Path, status)
		}))
		t.Cleanup(redirector.Close)
		l := newLog(t, 3, -1)
		client := &Client{URL: redirector.URL, Key: c.Verifier()}
		_, err := client.Submit(context.Background(), TreeProver{&l.tree}, l.checkpoint(t, 3))
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.Status != status {
			t.Fatalf("%d: err = %v, want the redirect as a refusal", status, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the redirect target saw %d requests", n)
	}
}
