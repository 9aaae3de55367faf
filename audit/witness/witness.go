// Package witness serves a C2SP tlog-witness over HTTP (add-checkpoint),
// keeps its state in a file, and submits checkpoints to witnesses as a log.
// The rules (what a witness cosigns) are audit.Witness's; this package is
// the transport and the storage around them.
//
// A witness:
//
//	w, err := witness.Open(cosigner, logKeys, "/var/lib/witness/state.json")
//	http.Handle("/", w.Handler())
//
// A log, after signing a checkpoint:
//
//	c := &witness.Client{URL: "http://127.0.0.1:7380", Key: cosignerVerifier}
//	lines, err := c.Submit(ctx, tree, signedNote)
package witness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/contextos/ledger/audit"
	"github.com/contextos/ledger/kernel"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// stateFile is the JSON form of a witness's state.
type stateFile struct {
	V    int        `json:"v"`
	Logs []stateLog `json:"logs"`
}

type stateLog struct {
	Origin     string `json:"origin"`
	Checkpoint string `json:"checkpoint"` // the last cosigned checkpoint, as the log signed it
}

// LoadState reads a state file; a missing file is an empty state.
func LoadState(path string) (audit.WitnessState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return audit.WitnessState{}, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := parseState(b)
	if err != nil {
		return nil, fmt.Errorf("witness: state %s: %w", path, err)
	}
	return s, nil
}

// parseState decodes a state file strictly: version 1, each origin once,
// each checkpoint a readable checkpoint note of its origin.
func parseState(b []byte) (audit.WitnessState, error) {
	var f stateFile
	if err := kernel.StrictJSON(b, &f); err != nil {
		return nil, err
	}
	if f.V != 1 {
		return nil, errors.New("want \"v\": 1")
	}
	s := audit.WitnessState{}
	for _, l := range f.Logs {
		if _, dup := s[l.Origin]; dup {
			return nil, fmt.Errorf("log %q twice", l.Origin)
		}
		c, err := audit.ReadCheckpoint([]byte(l.Checkpoint))
		if err != nil || c.Origin != l.Origin {
			return nil, fmt.Errorf("log %q: not a checkpoint of that log", l.Origin)
		}
		s[l.Origin] = []byte(l.Checkpoint)
	}
	return s, nil
}

// SaveState writes s to path atomically (a temporary file, fsync, rename,
// fsync of the directory), so a crash leaves the old state or the new one.
func SaveState(path string, s audit.WitnessState) error {
	f := stateFile{V: 1, Logs: []stateLog{}}
	for origin, msg := range s {
		f.Logs = append(f.Logs, stateLog{Origin: origin, Checkpoint: string(msg)})
	}
	sort.Slice(f.Logs, func(i, j int) bool { return f.Logs[i].Origin < f.Logs[j].Origin })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// Open returns the witness cosigning with c for the logs of logKeys, its
// state kept in the file at statePath.
func Open(c *audit.Cosigner, logKeys []string, statePath string) (*audit.Witness, error) {
	st, err := LoadState(statePath)
	if err != nil {
		return nil, err
	}
	return audit.NewWitness(c, logKeys, st, func(s audit.WitnessState) error { return SaveState(statePath, s) })
}

// Handler serves POST /add-checkpoint for w, with the statuses of the C2SP
// tlog-witness protocol; a refusal's body says why (409: the witness's size,
// as text/x.tlog.size).
func Handler(w *audit.Witness) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, audit.MaxNoteSize+16*1024))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := audit.ParseAddCheckpoint(body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		line, err := w.Add(req)
		var we *audit.WitnessError
		switch {
		case errors.As(err, &we) && we.Status == http.StatusConflict:
			rw.Header().Set("Content-Type", "text/x.tlog.size")
			rw.Header().Set("X-Witness-Reason", we.Reason)
			rw.WriteHeader(http.StatusConflict)
			fmt.Fprintf(rw, "%d\n", we.Size)
		case errors.As(err, &we):
			http.Error(rw, we.Reason, we.Status)
		case err != nil:
			http.Error(rw, err.Error(), http.StatusInternalServerError)
		default:
			rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = rw.Write(line)
		}
	})
	return mux
}

// Client submits a log's checkpoints to one witness. It remembers the size
// the witness last cosigned (learned from its replies) to send the right
// consistency proof. Safe for concurrent use.
type Client struct {
	URL  string          // the witness's submission prefix, e.g. http://127.0.0.1:7380
	Key  *audit.Cosigner // the witness's cosignature key: its lines are checked before they are kept
	HTTP *http.Client    // default: a client with a 5 s timeout

	mu    sync.Mutex
	known int64 // the witness's size; -1 until learned
	init  bool
}

// RefusedError is a witness that refused a checkpoint, with its status and
// reason.
type RefusedError struct {
	Status int
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("witness refused the checkpoint: %d %s", e.Status, e.Reason)
}

// Prover makes the consistency proof of a log's first oldSize records in
// its first size records, the proof a witness that has cosigned oldSize
// records asks for.
type Prover interface {
	ProveTree(ctx context.Context, size, oldSize int64) (tlog.TreeProof, error)
}

// TreeProver proves from a Merkle tree held in memory.
type TreeProver struct{ Tree *audit.Tree }

// ProveTree implements Prover.
func (p TreeProver) ProveTree(_ context.Context, size, oldSize int64) (tlog.TreeProof, error) {
	return p.Tree.ProveTree(size, oldSize)
}

// Known returns the size the witness was last known to have cosigned (0
// until learned).
func (c *Client) Known() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known
}

// Submit asks the witness to cosign the signed checkpoint note of the
// log's first size records, proving it consistent with what the witness
// cosigned before with proofs from tree, and returns its cosignature line (checked
// against c.Key). When the witness's last size is unknown or stale it asks
// again once with the size the witness gave. A refusal is a *RefusedError.
func (c *Client) Submit(ctx context.Context, tree Prover, signed []byte) ([]byte, error) {
	cp, err := audit.ReadCheckpoint(signed)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.init {
		c.known, c.init = 0, true
	}
	for attempt := 0; attempt < 2; attempt++ {
		if c.known > cp.Size {
			return nil, &RefusedError{Status: http.StatusConflict, Reason: fmt.Sprintf("the witness has cosigned %d records, more than this checkpoint's %d", c.known, cp.Size)}
		}
		var proof tlog.TreeProof
		if c.known > 0 {
			if proof, err = tree.ProveTree(ctx, cp.Size, c.known); err != nil {
				return nil, err
			}
		}
		status, body, reason, err := c.post(ctx, audit.AddCheckpoint{OldSize: c.known, Proof: proof, Note: signed}.Marshal())
		if err != nil {
			return nil, err
		}
		switch status {
		case http.StatusOK:
			if err := checkLines(cp, body, c.Key); err != nil {
				return nil, err
			}
			c.known = cp.Size
			return body, nil
		case http.StatusConflict:
			n, perr := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
			if perr != nil || n < 0 {
				return nil, fmt.Errorf("witness: 409 without a size: %q", body)
			}
			if n == c.known {
				return nil, &RefusedError{Status: status, Reason: reason}
			}
			c.known = n
		default:
			return nil, &RefusedError{Status: status, Reason: strings.TrimSpace(string(body))}
		}
	}
	return nil, &RefusedError{Status: http.StatusConflict, Reason: "the witness's size keeps changing"}
}

func (c *Client) post(ctx context.Context, body []byte) (status int, reply []byte, reason string, err error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, "", fmt.Errorf("witness %s: %w", c.URL, err)
	}
	defer resp.Body.Close()
	reply, err = io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	if err != nil {
		return 0, nil, "", fmt.Errorf("witness %s: %w", c.URL, err)
	}
	return resp.StatusCode, reply, resp.Header.Get("X-Witness-Reason"), nil
}

// checkLines checks that the reply is exactly one valid cosignature line of
// key over cp.
func checkLines(cp audit.Checkpoint, lines []byte, key *audit.Cosigner) error {
	if key == nil {
		return errors.New("witness: client has no witness key to check the reply")
	}
	if bytes.Count(lines, []byte("\n")) != 1 || !bytes.HasPrefix(lines, []byte("— "+key.Name()+" ")) {
		return fmt.Errorf("witness: reply is not one cosignature line of %q", key.Name())
	}
	// A note made of the text and the line opens only if the line verifies.
	msg := append(append(cp.Text(), '\n'), lines...)
	if _, err := note.Open(msg, note.VerifierList(key.Verifier())); err != nil {
		return fmt.Errorf("witness: reply does not verify: %w", err)
	}
	return nil
}
