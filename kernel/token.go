package kernel

import "errors"

// ValidToken checks an identifier that becomes one NATS subject token:
// tenant, principal and guarantee ids. It must be 1..64 bytes of
// [A-Za-z0-9_-].
func ValidToken(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > 64 {
		return errors.New("must be at most 64 bytes")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return errors.New("may only hold A-Z a-z 0-9 _ -")
		}
	}
	return nil
}
