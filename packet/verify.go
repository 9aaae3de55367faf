package packet

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/kernel"
)

// ErrRefused is matched (errors.Is) by every error Verify returns: the
// packet is not what its signatures say, and is not replayed.
var ErrRefused = errors.New("packet: refused")

type refused struct{ msg string }

func (e *refused) Error() string        { return "packet: refused: " + e.msg }
func (e *refused) Is(target error) bool { return target == ErrRefused }

// Keyring returns the packet's keys as a codec.Keyring, each under the id
// its public key derives (a key filed under another id is refused).
func (p *Packet) Keyring() (codec.Keyring, error) {
	kr := codec.Keyring{}
	for id, s := range p.Keys {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, &refused{fmt.Sprintf("key %q is not an Ed25519 public key", id)}
		}
		if got := kr.Add(ed25519.PublicKey(b)); got != id {
			return nil, &refused{fmt.Sprintf("key filed as %q derives the id %q", id, got)}
		}
	}
	return kr, nil
}

// Verify checks that every event of the packet (the decision and every
// read subject's) verifies under the packet's keys and, when trusted is
// not nil, that each signing key is one trusted holds too; that every
// event decodes as its kernel type and belongs to the subject it is filed
// under. It returns an error matching ErrRefused.
func (p *Packet) Verify(trusted codec.Keyring) error {
	kr, err := p.Keyring()
	if err != nil {
		return err
	}
	check := func(where string, e codec.Envelope) (kernel.Event, error) {
		if err := kr.Verify(e); err != nil {
			return nil, &refused{fmt.Sprintf("%s: %v", where, err)}
		}
		if trusted != nil {
			if err := trusted.Verify(e); err != nil {
				return nil, &refused{fmt.Sprintf("%s: not signed by a trusted key: %v", where, err)}
			}
		}
		ev, err := kernel.DecodeCanonicalEvent(e.Type, e.V, e.Body)
		if err != nil {
			return nil, &refused{fmt.Sprintf("%s: %v", where, err)}
		}
		return ev, nil
	}
	ev, err := check("decision", p.Decision)
	if err != nil {
		return err
	}
	if _, ok := ev.(kernel.DecisionRecorded); !ok {
		return &refused{"decision: not a decision record"}
	}
	for i, s := range p.Subjects {
		k, err := s.Key()
		if err != nil {
			return &refused{fmt.Sprintf("subjects[%d]: %v", i, err)}
		}
		for j, e := range s.Events {
			ev, err := check(fmt.Sprintf("subjects[%d].events[%d]", i, j), e)
			if err != nil {
				return err
			}
			if err := k.Check(ev); err != nil {
				return &refused{fmt.Sprintf("subjects[%d].events[%d]: not an event of %s: %v", i, j, k, err)}
			}
		}
	}
	return nil
}
