package main

import (
	"errors"
	"fmt"

	"github.com/contextos/ledger/events/codec"
	"github.com/contextos/ledger/packet"
)

// packetReplay is the JSON form of a packet's replay (ctx replay --packet --json).
type packetReplay struct {
	Equal      bool               `json:"equal"`
	Recorded   string             `json:"recorded"`
	Replayed   string             `json:"replayed"`
	Difference *packet.Difference `json:"difference,omitempty"`
}

// replayPacket verifies and replays one decision's packet: exit 0 equal,
// 1 refused or different.
func replayPacket(path, keysPath string, asJSON bool) error {
	var trusted codec.Keyring
	if keysPath != "" {
		k, err := auditReadKeys(keysPath)
		if err != nil {
			return err
		}
		trusted = k.Keyring
		if trusted == nil {
			trusted = codec.Keyring{}
		}
	}
	p, err := readFileAs(path, packet.Parse)
	if err != nil {
		return err
	}
	if err := p.Verify(trusted); err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", path, err)}
	}
	res, err := p.Replay()
	if err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("%s cannot be replayed: %w", path, err)}
	}
	return reportReplay(res, asJSON)
}

func reportReplay(res packet.Result, asJSON bool) error {
	if asJSON {
		if err := printJSON(packetReplay{Equal: res.Equal, Recorded: res.Recorded, Replayed: res.Replayed, Difference: res.Difference}); err != nil {
			return err
		}
	} else if res.Equal {
		fmt.Printf("equal: %s\n", res.Recorded)
	}
	if !res.Equal {
		return &ExitError{Code: 1, Err: errors.New("differs: " + res.Difference.String())}
	}
	return nil
}
