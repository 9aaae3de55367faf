package tower

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// maxKeptNote bounds a kept checkpoint file: a note with its log signature
// and the cosignatures of at most 64 witnesses is far smaller.
const maxKeptNote = 64 << 10

// keptPath is where a source's kept checkpoint lives under the state dir,
// "" when tower keeps them in memory only.
func (t *Tower) keptPath(s source) string {
	if t.cfg.StateDir == "" {
		return ""
	}
	return filepath.Join(t.cfg.StateDir, s.rt.Name, s.t.ID+".checkpoint")
}

// kept returns the checkpoint note tower kept for a source (nil: none).
// The caller holds r.mu.
func (t *Tower) kept(s source, r *reading) ([]byte, error) {
	if r.keptLoaded {
		return r.kept, nil
	}
	if p := t.keptPath(s); p != "" {
		b, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		case len(b) > maxKeptNote:
			return nil, errors.New("kept checkpoint " + p + " is too large")
		default:
			r.kept = b
		}
	}
	r.keptLoaded = true
	return r.kept, nil
}

// keep replaces a source's kept checkpoint by a newer verified one, on
// disk first (written to a temporary file and renamed, so a crash leaves
// the old one or the new one). The caller holds r.mu.
func (t *Tower) keep(s source, r *reading, note []byte) error {
	if p := t.keptPath(s); p != "" {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, note, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
	}
	r.kept, r.keptLoaded = append([]byte(nil), note...), true
	return nil
}
