package kernel

import (
	"encoding/json"

	"github.com/cockroachdb/apd/v3"
	"github.com/contextos/ledger/wire"
)

// MaxAmount is the largest amount or limit the ledger accepts: 2^53-1, the
// largest integer every JSON implementation represents exactly. Because every
// balance is bounded by a limit no larger than MaxAmount, sums of two or three
// of them fit an int64 without overflow; amounts are therefore carried as
// int64 after apd has proven them exact.
const MaxAmount int64 = 1<<53 - 1

var maxAmountDec = apd.New(MaxAmount, 0)

// ParseAmount validates a JSON value decoded with UseNumber as an amount: an
// exact positive integer no larger than MaxAmount. The value may be written
// in any JSON number form whose value is integral (80000, 8e4, 80000.0);
// zero, negatives, fractions, out-of-range values, strings, booleans, null
// and missing values are refused with CodeAmountInvalid.
func ParseAmount(v any) (int64, *Refusal) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, refuse(wire.CodeAmountInvalid, "amount must be a JSON number, got %s", jsonKind(v))
	}
	return parseExactPositive(string(n), wire.CodeAmountInvalid, "amount")
}

// parseExactPositive parses a JSON number literal exactly with apd and
// accepts it only when it is a positive integer <= MaxAmount.
func parseExactPositive(lit string, code wire.Code, what string) (int64, *Refusal) {
	d, _, err := apd.NewFromString(lit)
	if err != nil || d.Form != apd.Finite {
		return 0, refuse(code, "%s %q is not a finite number", what, clip(lit))
	}
	if d.Sign() <= 0 {
		return 0, refuse(code, "%s %q must be positive", what, clip(lit))
	}
	var r apd.Decimal
	r.Reduce(d)
	if r.Exponent < 0 {
		return 0, refuse(code, "%s %q is not an integer", what, clip(lit))
	}
	if r.Cmp(maxAmountDec) > 0 {
		return 0, refuse(code, "%s %q exceeds 2^53-1", what, clip(lit))
	}
	i, err := r.Int64()
	if err != nil {
		return 0, refuse(code, "%s %q is out of range", what, clip(lit))
	}
	return i, nil
}

// exactFloat reports whether a JSON number literal survives a round trip
// through an IEEE 754 double unchanged in value. RFC 8785 canonicalizes
// numbers through doubles, so two arguments that differ only beyond double
// precision would otherwise share an action digest.
func exactFloat(lit string) bool {
	d, _, err := apd.NewFromString(lit)
	if err != nil || d.Form != apd.Finite {
		return false
	}
	f, err := d.Float64()
	if err != nil {
		return false
	}
	var back apd.Decimal
	if _, err := back.SetFloat64(f); err != nil {
		return false
	}
	return back.Cmp(d) == 0
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case missing:
		return "nothing (missing)"
	}
	return "unknown"
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
