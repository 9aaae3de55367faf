package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/contextos/ledger/kernel"
	"io"
	"strings"

	"github.com/contextos/ledger/events/codec"
)

// EventLine is one line of codec.jsonl, the export of a tenant's raw events
// (ctx events export): the event with where the stream stored it. Each line
// is the canonical (JCS) encoding of
//
//	{"event":<canonical envelope>,"seq":<stream sequence>,"subject":"ctx.ev.<tenant>...."}
//
// followed by "\n"; sequences strictly increase from line to line. The
// subject is part of the line because events that name only an attempt
// (dispatch_started, observed, ...) are routed to their resource ledger by
// the subject they were appended to.
type EventLine struct {
	Seq      uint64
	Subject  string
	Envelope codec.Envelope
	Raw      []byte // the canonical envelope
}

type eventLineFile struct {
	Event   json.RawMessage `json:"event"`
	Seq     uint64          `json:"seq"`
	Subject string          `json:"subject"`
}

type eventLineFields struct {
	Event   json.RawMessage `json:"event"`
	Seq     *uint64         `json:"seq"`
	Subject *string         `json:"subject"`
}

// MarshalEventLine returns the codec.jsonl line (newline included) of the
// event raw (its canonical envelope) stored at seq on subject. It refuses an
// event that does not decode strictly or does not belong to the subject's
// tenant.
func MarshalEventLine(seq uint64, subject string, raw []byte) ([]byte, error) {
	l := EventLine{Seq: seq, Subject: subject, Raw: raw}
	env, err := codec.Decode(raw)
	if err != nil {
		return nil, err
	}
	l.Envelope = env
	if err := l.validate(); err != nil {
		return nil, err
	}
	return CanonicalLine(eventLineFile{Event: raw, Seq: seq, Subject: subject})
}

func (l EventLine) validate() error {
	if l.Seq < 1 || l.Seq > MaxIndex {
		return fmt.Errorf("seq %d out of range", l.Seq)
	}
	if err := codec.ValidSubject(l.Subject); err != nil {
		return err
	}
	if !strings.HasPrefix(l.Subject, codec.TenantPrefix(l.Envelope.Tenant)) {
		return fmt.Errorf("event of tenant %q on subject %q", l.Envelope.Tenant, l.Subject)
	}
	return nil
}

// ParseEventLine parses one line of codec.jsonl (without its newline)
// strictly: exactly the three fields, a strictly decodable event
// (codec.Decode) of the subject's tenant, and the canonical encoding.
func ParseEventLine(line []byte) (EventLine, error) {
	var f eventLineFields
	if err := kernel.StrictJSON(line, &f); err != nil {
		return EventLine{}, err
	}
	if f.Event == nil || f.Seq == nil || f.Subject == nil {
		return EventLine{}, errors.New("a field is missing")
	}
	env, err := codec.Decode(f.Event)
	if err != nil {
		return EventLine{}, err
	}
	l := EventLine{Seq: *f.Seq, Subject: *f.Subject, Envelope: env, Raw: f.Event}
	if err := l.validate(); err != nil {
		return EventLine{}, err
	}
	// Re-encode the parsed line: a line is accepted only as its own
	// encoding, which also refuses key spellings encoding/json matches
	// case-insensitively ("suBjeCt" for "subject").
	c, err := MarshalEventLine(l.Seq, l.Subject, l.Raw)
	if err != nil {
		return EventLine{}, err
	}
	if !bytes.Equal(bytes.TrimRight(c, "\n"), line) {
		return EventLine{}, errors.New("line is not the canonical encoding of its fields (JCS, exact key names)")
	}
	return l, nil
}

// maxLine bounds one codec.jsonl line: an envelope of
// codec.MaxEnvelopeSize plus the line's own fields.
const maxLine = codec.MaxEnvelopeSize + 2048

// ReadEvents reads codec.jsonl and calls fn for each line, in order. It is
// strict: every line ends with "\n", parses (ParseEventLine) and has a larger
// sequence than the line before; errors name the line number (from 1).
func ReadEvents(r io.Reader, fn func(EventLine) error) error {
	br := bufio.NewReaderSize(r, 64*1024)
	var last uint64
	for n := 1; ; n++ {
		line, err := readLine(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: events line %d: %w", n, err)
		}
		l, err := ParseEventLine(line)
		if err != nil {
			return fmt.Errorf("audit: events line %d: %w", n, err)
		}
		if l.Seq <= last {
			return fmt.Errorf("audit: events line %d: seq %d does not follow %d", n, l.Seq, last)
		}
		last = l.Seq
		if err := fn(l); err != nil {
			return err
		}
	}
}

// readLine returns the next line without its "\n", io.EOF at a clean end, or
// an error for a last line without "\n" or a line longer than maxLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine+1 {
			return nil, errors.New("line too long")
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, errors.New("last line does not end with a newline")
		default:
			return nil, err
		}
	}
}
