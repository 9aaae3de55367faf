package events

import (
	"bytes"
	"github.com/contextos/ledger/events/codec"
	"sync"
)

// memoSlots is how many decoded messages a JetStore remembers: enough for
// the runtime's followers, which replay what the engine has just appended,
// to find it while they are a few thousand events behind.
const memoSlots = 1 << 13

// decodeMemo remembers, by stream sequence, the envelope of messages this
// process has just stored or decoded. The runtime's followers (the exposure
// view and each tenant's audit projector) replay every event the engine
// appends; decoding the same bytes again in each of them was a tenth of the
// runtime's CPU under proposals (docs/performance.md). An entry answers only
// for the very bytes it was made from, so it can never stand for another
// message: Decode is a function of the bytes, and Encode's output decodes to
// the envelope it was made from (FuzzDecode holds both).
type decodeMemo struct {
	mu    sync.Mutex
	slots []memoSlot
}

type memoSlot struct {
	seq uint64
	raw []byte
	env codec.Envelope
}

func (m *decodeMemo) get(seq uint64, raw []byte) (codec.Envelope, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slots == nil {
		return codec.Envelope{}, false
	}
	sl := &m.slots[seq%memoSlots]
	if sl.seq != seq || !bytes.Equal(sl.raw, raw) {
		return codec.Envelope{}, false
	}
	return sl.env, true
}

func (m *decodeMemo) put(seq uint64, raw []byte, env codec.Envelope) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slots == nil {
		m.slots = make([]memoSlot, memoSlots)
	}
	m.slots[seq%memoSlots] = memoSlot{seq: seq, raw: raw, env: env}
}

// decode returns Decode(raw) for the message at seq, from the memo when it
// holds these bytes.
func (m *decodeMemo) decode(seq uint64, raw []byte) (codec.Envelope, error) {
	if env, ok := m.get(seq, raw); ok {
		return env, nil
	}
	env, err := codec.Decode(raw)
	if err != nil {
		return codec.Envelope{}, err
	}
	m.put(seq, raw, env)
	return env, nil
}
