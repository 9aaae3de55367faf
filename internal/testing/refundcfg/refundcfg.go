package refundcfg

import (
	_ "embed"
	"fmt"
	"strings"
)

// template is refund.toml: the one refund configuration, with {{DATA}} and
// {{PROVIDER}} for the data directory and the provider's base URL.
//
//go:embed refund.toml
var template string

// The names and figures of refund.toml that tests assert on.
const (
	// Capability is the refund capability's id.
	Capability = "adp_payments.issue_refund"
	// Guarantee is the per-order refund ceiling's id.
	Guarantee = "refunds-per-order"
	// Limit is Guarantee's limit, in INR_minor.
	Limit = 100000
)

// Passwords are the passwords refund.toml gives tenant acme's principals.
var Passwords = map[string]string{
	"agent_email":    "email-secret-passphrase",
	"agent_chat":     "chat-secret-passphrase",
	"agent_third":    "third-secret-passphrase",
	"agent_readonly": "ro-secret-passphrase",
	"ops_alice":      "alice-secret-passphrase",
}

// GlobexPassword is the password of tenant globex's agent_email.
const GlobexPassword = "globex-secret-passphrase"

// Text returns the whole configuration for a data directory and the
// synthetic provider's base URL.
func Text(data, provider string) string {
	return strings.NewReplacer("{{DATA}}", data, "{{PROVIDER}}", provider).Replace(template)
}

// Refund returns the refund capability's [[capabilities]] table and the
// per-order ceiling's [[guarantees]] table for the provider's base URL:
// what a tool that writes its own [nats], [runtime] and tenants appends.
func Refund(provider string) string {
	t := Text("", provider)
	return Block(t, "capabilities", Capability) + "\n" + Block(t, "guarantees", Guarantee)
}

// Replace returns text with each old of the old, new pairs replaced by its
// new. It panics if an old does not occur exactly once, so an edit cannot
// silently stop applying when refund.toml changes.
func Replace(text string, oldnew ...string) string {
	if len(oldnew)%2 != 0 {
		panic("refundcfg: Replace needs old, new pairs")
	}
	for i := 0; i < len(oldnew); i += 2 {
		if n := strings.Count(text, oldnew[i]); n != 1 {
			panic(fmt.Sprintf("refundcfg: the configuration has %d of %q, not one", n, oldnew[i]))
		}
		text = strings.Replace(text, oldnew[i], oldnew[i+1], 1)
	}
	return text
}

// span returns where the [[kind]] table whose first key is id = "id"
// starts and ends in text: through the line before the next top-level
// table, or the end of text. It panics if there is not exactly one.
func span(text, kind, id string) (start, end int) {
	head := fmt.Sprintf("[[%s]]\nid = %q\n", kind, id)
	if n := strings.Count(text, head); n != 1 {
		panic(fmt.Sprintf("refundcfg: the configuration has %d [[%s]] %q, not one", n, kind, id))
	}
	start = strings.Index(text, head)
	end = len(text)
	if i := strings.Index(text[start+len(head):], "\n["); i >= 0 {
		end = start + len(head) + i + 1
	}
	return start, end
}

// Block returns the [[kind]] table of text whose id is id (kind is
// "capabilities", "guarantees" or "tenants"), up to the next top-level
// table.
func Block(text, kind, id string) string {
	start, end := span(text, kind, id)
	return text[start:end]
}

// EditBlock is Replace within the [[kind]] table whose id is id only.
func EditBlock(text, kind, id string, oldnew ...string) string {
	start, end := span(text, kind, id)
	return text[:start] + Replace(text[start:end], oldnew...) + text[end:]
}

// AppendToBlock adds fragment (sub-tables or keys' lines) at the end of
// the [[kind]] table whose id is id.
func AppendToBlock(text, kind, id, fragment string) string {
	start, end := span(text, kind, id)
	block := strings.TrimRight(text[start:end], "\n") + "\n" + strings.TrimRight(fragment, "\n") + "\n"
	if end < len(text) {
		block += "\n"
	}
	return text[:start] + block + text[end:]
}

// Derive appends to text a copy of the [[kind]] table whose id is id under
// newID, with the Replace edits oldnew applied to the copy: a variant that
// cannot drift from the table it comes from.
func Derive(text, kind, id, newID string, oldnew ...string) string {
	block := Block(text, kind, id)
	block = strings.Replace(block, fmt.Sprintf("id = %q\n", id), fmt.Sprintf("id = %q\n", newID), 1)
	return strings.TrimRight(text, "\n") + "\n\n" + Replace(block, oldnew...)
}

// Without returns text without the [[kind]] table whose id is id.
func Without(text, kind, id string) string {
	start, end := span(text, kind, id)
	return text[:start] + text[end:]
}
