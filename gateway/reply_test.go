package gateway

import (
	"testing"

	"github.com/contextos/ledger/wire"
)

func TestReplyAllowed(t *testing.T) {
	cases := []struct {
		reply string
		want  bool
	}{
		{"", true},
		{"_INBOX.acme.agent_email.abc", true},
		{"_INBOX.acme.agent_email.abc.def", true},
		{"_INBOX.acme.agent_emailx.abc", false},
		{"_INBOX.acme.agent_chat.abc", false},
		{"_INBOX.globex.agent_email.abc", false},
		{"ctx.ev.acme.control", false},
		{"ctx.ev.acme.exposure.refunds-per-order.rord_881", false},
		{"$JS.API.STREAM.DELETE.CTX_EVENTS", false},
		{"_INBOX.acme.agent_email", false},
	}
	for _, c := range cases {
		if got := wire.ReplyAllowed(c.reply, "acme", "agent_email"); got != c.want {
			t.Errorf("replyAllowed(%q) = %v, want %v", c.reply, got, c.want)
		}
	}
}
