package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// RuntimePublish and RuntimeSubscribe are the subjects the runtime's own
// NATS user must be allowed on an external deployment: the JetStream API
// and acknowledgements, the event, snapshot and audit streams' subjects,
// the replies to its own requests and to operators, and the request that
// reads these permissions back. docs/operations.md gives them as a
// nats-server block.
var (
	RuntimePublish   = []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$KV.CTX_SNAPSHOTS.>", "ctx.ev.>", "ctx.audit.>", "_INBOX.>", userInfoSubject}
	RuntimeSubscribe = []string{"ctx.v1.>", "ctx.ev.>", "_INBOX.>"}
)

// userInfoSubject is the server's own answer to "what may I do".
const userInfoSubject = "$SYS.REQ.USER.INFO"

// CheckPermissions asks the server what the connection's user may publish
// and subscribe to and fails naming every subject of publish and subscribe
// that is missing. Without it a runtime whose user lacks, say, publish on
// ctx.audit.> would say ready and keep an empty audit: the server refuses
// such publishes asynchronously, and nothing would fail.
func CheckPermissions(nc *nats.Conn, role string, publish, subscribe []string) error {
	msg, err := nc.Request(userInfoSubject, nil, 5*time.Second)
	if err != nil {
		return fmt.Errorf("%s: cannot read the NATS user's permissions (request %s: %v): it needs publish %s and subscribe _INBOX.> (docs/operations.md)", role, userInfoSubject, err, userInfoSubject)
	}
	var resp struct {
		Data  *server.UserInfo `json:"data"`
		Error *server.ApiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Data == nil {
		return fmt.Errorf("%s: unreadable reply to %s: %q", role, userInfoSubject, msg.Data)
	}
	var p server.Permissions
	if resp.Data.Permissions != nil {
		p = *resp.Data.Permissions
	}
	var missing []string
	for _, s := range publish {
		if !permits(p.Publish, s) {
			missing = append(missing, "publish "+s)
		}
	}
	for _, s := range subscribe {
		if !permits(p.Subscribe, s) {
			missing = append(missing, "subscribe "+s)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: the NATS user %q lacks %s (docs/operations.md lists what it needs)", role, resp.Data.UserID, strings.Join(missing, ", "))
	}
	return nil
}

// permits reports whether a permission lets every subject of pattern s
// through: some allow covers all of s (or there is no allow list) and no
// deny overlaps it.
func permits(p *server.SubjectPermission, s string) bool {
	if p == nil {
		return true
	}
	if len(p.Allow) > 0 && !slices.ContainsFunc(p.Allow, func(a string) bool { return server.SubjectMatchesFilter(s, a) }) {
		return false
	}
	return !slices.ContainsFunc(p.Deny, func(d string) bool { return server.SubjectsCollide(s, d) })
}
