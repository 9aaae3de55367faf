package gateway

import (
	"github.com/contextos/ledger/config"
	"github.com/contextos/ledger/wire"
	"github.com/nats-io/nats-server/v2/server"
)

// RuntimeUser is the NATS user of the runtime itself on the embedded server:
// the only user that may touch $JS.API.>, $JS.ACK.>, $KV.> and ctx.ev.>.
const RuntimeUser = "contextosd"

// ReplyUser is the NATS user the runtime publishes its replies through. It
// may publish only to _INBOX.> and subscribe to nothing, so a reply can never
// reach the streams or the JetStream API, whatever subject a requester named
// and even if the reply-subject check (replyAllowed) had a hole: the server
// refuses it.
const ReplyUser = "contextosd-replies"

// ServerUsers returns the users and permissions of the embedded server: an
// agent may publish only its own propose subject, an operator only its own
// ops subjects, and each may subscribe only to its own inbox. Nobody but the
// runtime reaches JetStream or the event subjects; the runtime's replies go
// through ReplyUser (same password), which may publish only to inboxes.
func ServerUsers(cfg *config.Config, runtimePassword string) []*server.User {
	users := []*server.User{{Username: RuntimeUser, Password: runtimePassword}, {Username: ReplyUser, Password: runtimePassword,
		Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			Subscribe: &server.SubjectPermission{Deny: []string{">"}},
		}}}
	for _, t := range cfg.Tenants {
		for _, a := range t.Agents {
			users = append(users, &server.User{Username: wire.UserName(t.ID, a.ID), Password: a.Password, Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{wire.ProposeSubject(t.ID, a.ID), wire.ContextSubject(t.ID, a.ID)}},
				Subscribe: &server.SubjectPermission{Allow: []string{wire.InboxPrefix(t.ID, a.ID) + ".>"}},
			}})
		}
		for _, o := range t.Operators {
			users = append(users, &server.User{Username: wire.UserName(t.ID, o.ID), Password: o.Password, Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{"ctx.v1." + t.ID + ".ops.*." + o.ID}},
				Subscribe: &server.SubjectPermission{Allow: []string{wire.InboxPrefix(t.ID, o.ID) + ".>"}},
			}})
		}
	}
	return users
}
