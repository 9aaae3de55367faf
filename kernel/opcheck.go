package kernel

import (
	"errors"
	"time"

	"github.com/contextos/ledger/wire"
)

// This file holds the checks of operator verbs' requests that come before
// any subject is read: which fields a verb needs, their bounds and forms,
// and the refusals of a request that names what the runtime does not know.
// The gateway measures (decodes the body, looks the attempt, agent or
// capability up) and calls them; the decisions of what the verbs change are
// the steps they lead to.

// IsDigest reports whether s is a digest as the views show one: 64
// lowercase hex digits (SHA-256).
func IsDigest(s string) bool { return validDigest(s) }

// DecodeOpRequest decodes an operator verb's body strictly: one JSON object
// (bounded depth, exact numbers, DecodeArguments) with no unknown field
// (DecodeRequest); an empty body is refused.
func DecodeOpRequest(body []byte, into any) *Refusal {
	err := errors.New("empty request")
	if len(body) > 0 {
		if _, r := DecodeArguments(body); r != nil {
			err = errors.New(r.Reason)
		} else {
			err = DecodeRequest(body, into)
		}
	}
	if err != nil {
		return refuse(wire.CodeRequestMalformed, "request: %v", err)
	}
	return nil
}

// RefuseUnknownVerb refuses a verb the runtime does not serve.
func RefuseUnknownVerb(verb string) *Refusal {
	return refuse(wire.CodeRequestMalformed, "unknown verb %q", verb)
}

// CheckPageLimit refuses a page size outside 0 (the default) to
// wire.MaxPageLimit.
func CheckPageLimit(limit int) *Refusal {
	if limit < 0 || limit > wire.MaxPageLimit {
		return refuse(wire.CodeRequestMalformed, "limit must be 0 (the default, %d) to %d, not %d", wire.DefaultPageLimit, wire.MaxPageLimit, limit)
	}
	return nil
}

// CheckResourceDigest refuses a request that names a resource by digest
// (as a view showed it) and by id, or by a digest that is not one.
func CheckResourceDigest(resource, digest string) *Refusal {
	switch {
	case digest == "":
		return nil
	case resource != "":
		return refuse(wire.CodeRequestMalformed, "name resource or resource_digest, not both")
	case !IsDigest(digest):
		return refuse(wire.CodeRequestMalformed, "resource_digest must be 64 lowercase hex digits (the SHA-256 of the resource)")
	}
	return nil
}

// RefuseUnknownResourceDigest refuses a digest that names no resource of
// the guarantee the runtime knows.
func RefuseUnknownResourceDigest(guaranteeID, digest string) *Refusal {
	return refuse(wire.CodeRequestMalformed, "resource_digest %s names no resource of guarantee %q the runtime knows; name the resource itself", digest, guaranteeID)
}

// CheckExposureRequest refuses an exposure filter whose resource_digest is
// not a digest or comes with a resource.
func CheckExposureRequest(req wire.OpRequest) *Refusal {
	if req.ResourceDigest != "" && (req.Resource != "" || !IsDigest(req.ResourceDigest)) {
		return refuse(wire.CodeRequestMalformed, "resource_digest must be 64 lowercase hex digits (the SHA-256 of the resource), without resource")
	}
	return nil
}

// CheckReconcileRequest refuses a reconcile that names neither an attempt
// nor all of them.
func CheckReconcileRequest(req wire.OpRequest) *Refusal {
	if req.AttemptID == "" && !req.All {
		return refuse(wire.CodeRequestMalformed, "name attempt_id or set all")
	}
	return nil
}

// CheckCloseRequest refuses a close-attempt without an attempt, or of an
// attempt no operation holds (known false) that does not name the ledger
// (guarantee and resource or its digest) to tombstone it on.
func CheckCloseRequest(req wire.OpRequest, known bool) *Refusal {
	switch {
	case req.AttemptID == "":
		return refuse(wire.CodeRequestMalformed, "attempt_id is required")
	case !known && (req.GuaranteeID == "" || req.Resource == "" && req.ResourceDigest == ""):
		return refuse(wire.CodeAttemptUnknown, "attempt %s is unknown; name guarantee_id and resource (or resource_digest) to tombstone it", req.AttemptID)
	}
	return nil
}

// CheckAssertAbsenceRequest refuses an assert-absence without its attempt
// and artifact, or of an attempt no operation holds (known false).
func CheckAssertAbsenceRequest(req wire.OpRequest, known bool) *Refusal {
	switch {
	case req.AttemptID == "" || req.ArtifactRef == "":
		return refuse(wire.CodeRequestMalformed, "attempt_id and artifact_ref are required")
	case !known:
		return refuse(wire.CodeAttemptUnknown, "attempt %s: unknown attempt", req.AttemptID)
	}
	return nil
}

// CheckBreakerRequest refuses a breaker request that resets a capability
// the manifest does not surface (surfaced false), or that names a
// capability or a reason without resetting.
func CheckBreakerRequest(req wire.BreakerRequest, surfaced bool) *Refusal {
	switch {
	case req.Reset && !surfaced:
		return refuse(wire.CodeCapabilityNotSurfaced, "capability %q is not in the manifest", req.CapabilityID)
	case !req.Reset && (req.CapabilityID != "" || req.Reason != ""):
		return refuse(wire.CodeRequestMalformed, "capability_id and reason go with reset")
	}
	return nil
}

// CheckReconcileTarget refuses to reconcile an attempt no operation holds
// (known false), or to query the provider of a capability the manifest no
// longer has (query and not surfaced).
func CheckReconcileTarget(known, query, surfaced bool) *Refusal {
	switch {
	case !known:
		return refuse(wire.CodeAttemptUnknown, "no operation holds this attempt")
	case query && !surfaced:
		return refuse(wire.CodeCapabilityNotSurfaced, "capability no longer in the manifest")
	}
	return nil
}

// RefuseAttemptTarget refuses an action on an attempt whose operation or
// ledgers could not be located (err says why).
func RefuseAttemptTarget(err error) *Refusal {
	return refuse(wire.CodeAttemptUnknown, "%s", err.Error())
}

// CheckGrantRequest refuses a grant or revocation for a principal that is
// not one of the tenant's agents (agent false) or of a capability not in
// the manifest (surfaced false).
func CheckGrantRequest(tenant string, req wire.GrantRequest, agent, surfaced bool) *Refusal {
	switch {
	case !agent:
		return refuse(wire.CodeRequestMalformed, "%q is not an agent of tenant %s", req.Principal, tenant)
	case !surfaced:
		return refuse(wire.CodeCapabilityNotSurfaced, "capability %q is not in the manifest", req.CapabilityID)
	}
	return nil
}

// CheckAdmitRunRequest refuses to admit a run for a principal that is not
// one of the tenant's agents (agent false), or without a run id, or with an
// id over wire.MaxIDBytes.
func CheckAdmitRunRequest(tenant string, req wire.AdmitRunRequest, agent bool) *Refusal {
	switch {
	case !agent:
		return refuse(wire.CodeRequestMalformed, "%q is not an agent of tenant %s", req.Principal, tenant)
	case req.RunID == "" || len(req.RunID) > wire.MaxIDBytes || len(req.ParentRunID) > wire.MaxIDBytes:
		return refuse(wire.CodeRequestMalformed, "run_id is required and ids are at most %d bytes", wire.MaxIDBytes)
	}
	return nil
}

// CheckRunRequest refuses to read a run without a run id that names a
// subject (named false: the id makes no subject).
func CheckRunRequest(req wire.RunRequest, named bool) *Refusal {
	if req.RunID == "" || !named {
		return refuse(wire.CodeRequestMalformed, "run_id is required")
	}
	return nil
}

// CheckEvidenceRequest says whether an evidence request publishes a
// candidate (else it records a marker), and refuses one that names both or
// neither.
func CheckEvidenceRequest(req wire.EvidenceRequest) (candidate bool, r *Refusal) {
	switch {
	case len(req.Candidate) > 0 && len(req.Marker) == 0:
		return true, nil
	case len(req.Marker) > 0 && len(req.Candidate) == 0:
		return false, nil
	}
	return false, refuse(wire.CodeRequestMalformed, "name exactly one of candidate and marker")
}

// ParseApprovalTTL reads an approval's expires_in (a Go duration: 15m,
// 2h); DecideApprovalGrant bounds it.
func ParseApprovalTTL(expiresIn string) (time.Duration, *Refusal) {
	ttl, err := time.ParseDuration(expiresIn)
	if err != nil {
		return 0, refuse(wire.CodeRequestMalformed, "expires_in: %v", err)
	}
	return ttl, nil
}

// CheckImportRequest refuses an import of no rows or of more than
// wire.MaxImportRows.
func CheckImportRequest(req wire.ImportRequest) *Refusal {
	switch {
	case len(req.Rows) == 0:
		return refuse(wire.CodeRequestMalformed, "an import needs at least one row")
	case len(req.Rows) > wire.MaxImportRows:
		return refuse(wire.CodeRequestMalformed, "an import carries at most %d rows, not %d; split the file", wire.MaxImportRows, len(req.Rows))
	}
	return nil
}

// CheckConfirmRequest refuses a confirmation that names no request.
func CheckConfirmRequest(req wire.ConfirmRequest) *Refusal {
	if req.RequestID == "" {
		return refuse(wire.CodeRequestMalformed, "request_id is required")
	}
	return nil
}

// SecondOperatorRequired is the answer to a verb the tenant's two-person
// rule held (DecideOperatorVerb's SecondOperator) as request requestID:
// another operator with scope confirms it.
func SecondOperatorRequired(verb string, scope Scope, requestID string) *Refusal {
	return &Refusal{Code: wire.CodeSecondOperatorRequired,
		Reason: verb + " needs a second operator: another operator with the scope " + string(scope) + " confirms it with ctx confirm " + requestID}
}

// RefusePackUnknown refuses to show a pack version the tenant has not
// published (version as the reply may show it).
func RefusePackUnknown(version string) *Refusal {
	return refuse(wire.CodePackUnknown, "pack version %q is not published", version)
}

// ParseTimeFilter reads a list filter's time bound (name: since, until),
// RFC 3339; text is shown clipped (wire.Prefix).
func ParseTimeFilter(name, text string) (time.Time, *Refusal) {
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return time.Time{}, refuse(wire.CodeRequestMalformed, "%s must be an RFC 3339 time, not %q", name, wire.Prefix(text))
	}
	return t, nil
}

// ParseWaiverUntil reads a waiver's end, RFC 3339.
func ParseWaiverUntil(until string) (time.Time, *Refusal) {
	t, err := time.Parse(time.RFC3339, until)
	if err != nil {
		return time.Time{}, refuse(wire.CodeRequestMalformed, "until: an RFC 3339 time: %v", err)
	}
	return t, nil
}
