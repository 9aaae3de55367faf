package console

import (
	"strings"
	"testing"
	"time"

	"github.com/contextos/ledger/kernel"
)

// TestConsoleNextStepsKnown: every next safe step the kernel names has its
// actions here, so no open hold is shown without a way forward.
func TestConsoleNextStepsKnown(t *testing.T) {
	for _, s := range []kernel.ReceiptState{kernel.StateReserved, kernel.StateStarted, kernel.StateHeld} {
		as := actionsOf[s.NextSafeStep()]
		if len(as) == 0 {
			t.Fatalf("state %s: no console action for %q", s, s.NextSafeStep())
		}
		for _, a := range as {
			if actions[a] == nil {
				t.Fatalf("state %s names unknown action %s", s, a)
			}
		}
	}
}

// TestWriteEvent: a carriage return in the data (a resource id an agent
// chose) cannot start a field of the server-sent event.
func TestWriteEvent(t *testing.T) {
	var b strings.Builder
	writeEvent(&b, "live", []byte("<td>x\revent: ended\r\ndata: y\rid: 7</td>\nnext"))
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, "\r") || (line != "" && !strings.HasPrefix(line, "data: ") && line != "event: live") {
			t.Fatalf("line %q in\n%q", line, b.String())
		}
	}
}

func TestHoldAge(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {59 * time.Second, "59s"}, {time.Minute, "1m"}, {59*time.Minute + 59*time.Second, "59m"},
		{time.Hour, "1h00m"}, {47*time.Hour + 5*time.Minute, "47h05m"}, {48 * time.Hour, "2d"}, {400 * time.Hour, "16d"},
	} {
		if got := holdAge(c.d); got != c.want {
			t.Errorf("holdAge(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
