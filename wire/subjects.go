package wire

import "strings"

// UserName is the NATS user name of a principal: "<tenant>.<principal>".
func UserName(tenant, principal string) string { return tenant + "." + principal }

// InboxPrefix is the only inbox a principal may subscribe to; its clients
// must use it as their custom inbox prefix.
func InboxPrefix(tenant, principal string) string { return "_INBOX." + tenant + "." + principal }

// ProposeSubject is where an agent publishes proposals:
// "ctx.v1.<tenant>.<principal>.propose".
func ProposeSubject(tenant, principal string) string {
	return "ctx.v1." + tenant + "." + principal + ".propose"
}

// ContextSubject is where an agent asks for its run's compiled context:
// "ctx.v1.<tenant>.<principal>.context" (body ContextRequest, reply
// ContextReply).
func ContextSubject(tenant, principal string) string {
	return "ctx.v1." + tenant + "." + principal + ".context"
}

// OpSubject is where an operator sends a verb:
// "ctx.v1.<tenant>.ops.<verb>.<operator>".
func OpSubject(tenant, verb, operator string) string {
	return "ctx.v1." + tenant + ".ops." + verb + "." + operator
}

// ReplyAllowed reports whether the runtime may publish a reply to subject
// for (tenant, principal): only inside the principal's own inbox. The
// runtime's user may publish anywhere (it appends to ctx.ev.>), so a reply
// subject chosen by a requester must never be trusted: one naming an event
// subject would make the runtime store a reply as if it were an event.
// An empty reply (a publish without request) is allowed: nothing is sent.
func ReplyAllowed(subject, tenant, principal string) bool {
	return subject == "" || strings.HasPrefix(subject, InboxPrefix(tenant, principal)+".")
}
