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

// stateFile is the JSON form of a witness's state. Version 1 did not
// record the key; it is read as signed by one of the configured keys.
type stateFile struct {
	V    int        `json:"v"`
	Logs []stateLog `json:"logs"`
}

type stateLog struct {
	Origin     string `json:"origin"`
	Key        string `json:"key,omitempty"` // the log key that signed Checkpoint (version 2)
	Checkpoint string `json:"checkpoint"`    // the last cosigned checkpoint, as the log signed it
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

// parseState decodes a state file strictly: version 1 or 2 (which names
// the key of each log), each origin once, each checkpoint a readable
// checkpoint note of its origin.
func parseState(b []byte) (audit.WitnessState, error) {
	var f stateFile
	if err := kernel.StrictJSON(b, &f); err != nil {
		return nil, err
	}
	if f.V != 1 && f.V != 2 {
		return nil, errors.New("want \"v\": 2 (or 1)")
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
		if (f.V == 2) != (l.Key != "") {
			return nil, fmt.Errorf("log %q: a version 2 state names the key of each log, version 1 none", l.Origin)
		}
		s[l.Origin] = audit.WitnessLog{Key: l.Key, Checkpoint: []byte(l.Checkpoint)}
	}
	return s, nil
}

// SaveState writes s to path atomically (a temporary file, fsync, rename,
// fsync of the directory), so a crash leaves the old state or the new one.
func SaveState(path string, s audit.WitnessState) error {
	f := stateFile{V: 2, Logs: []stateLog{}}
	keyed := 0
	for origin, l := range s {
		f.Logs = append(f.Logs, stateLog{Origin: origin, Key: l.Key, Checkpoint: string(l.Checkpoint)})
		if l.Key != "" {
			keyed++
		}
	}
	switch keyed {
	case len(s):
	case 0: // a version 1 state read and written back before a witness opened it
		f.V = 1
	default:
		return errors.New("witness: a state names the key of some logs and not of others")
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
// as text/x.tlog.size). POST /add-rotation is the same for a checkpoint
// signed by a new log key, with the key rotation that hands the log to it
// (audit.ParseRotated, audit.Witness.AddRotated): a runtime whose key was
// rotated sends it after the witness refused its checkpoint (403).
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
		answer(rw, line, err)
	})
	mux.HandleFunc("POST /add-rotation", func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, audit.MaxNoteSize+16*1024+2*audit.MaxRotationRecord))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		rot, req, err := audit.ParseRotated(body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		line, err := w.AddRotated(rot, req)
		answer(rw, line, err)
	})
	return mux
}

// answer writes a witness's answer with the tlog-witness statuses.
func answer(rw http.ResponseWriter, line []byte, err error) {
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
}

// Client submits a log's checkpoints to one witness. It remembers the size
// the witness last cosigned (learned from its replies) to send the right
// consistency proof. Safe for concurrent use.
type Client struct {
	URL  string          // the witness's submission prefix, e.g. http://127.0.0.1:7380
	Key  *audit.Cosigner // the witness's cosignature key: its lines are checked before they are kept
	HTTP *http.Client    // default: a client with a 5 s timeout that follows no redirect

	mu    sync.Mutex
	known int64 // the witness's size; -1 until learned
	init  bool
}

// RefusedError is a witness that refused a checkpoint, with its status and
// reason, and with 409 the size the witness had cosigned.
type RefusedError struct {
	Status int
	Size   int64 // the witness's size, with 409
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("witness refused the checkpoint: %d %s", e.Status, e.Reason)
}

// Refusal kinds (RefusedError.Kind).
const (
	RefusalShrank   = "shrank"   // the witness cosigned more records than the checkpoint holds
	RefusalForked   = "forked"   // the checkpoint does not extend what the witness cosigned
	RefusalKey      = "key"      // no key the witness trusts signed the checkpoint (403)
	RefusalUnknown  = "unknown"  // the witness does not know the log (404)
	RefusalRejected = "rejected" // any other refusal
)

// Kind classifies the refusal of the checkpoint of size records: a 409 with
// a larger size is a log that shrank; a 422 (the consistency proof does not
// verify) or a 409 with the same size (C2SP's answer to the same size with
// another root; this project's witness and litewitness answer 422) a fork.
// These two say the log's history is not the one the witness saw; the
// others do not.
func (e *RefusedError) Kind(size int64) string {
	switch {
	case e.Status == http.StatusConflict && e.Size > size:
		return RefusalShrank
	case e.Status == http.StatusUnprocessableEntity, e.Status == http.StatusConflict && e.Size == size:
		return RefusalForked
	case e.Status == http.StatusForbidden:
		return RefusalKey
	case e.Status == http.StatusNotFound:
		return RefusalUnknown
	}
	return RefusalRejected
}

// Prover makes the consistency proof of a log's first oldSize records in
// its first size records, the proof a witness that has cosigned oldSize
// records asks for.
type Prover interface {
	ProveTree(ctx context.Context, size, oldSize int64) (tlog.TreeProof, error)
}

// RotationProver is a Prover that can also show a witness the latest key
// rotation among a log's first size records, with its inclusion proof in
// their tree (ok false: the log records none).
type RotationProver interface {
	Prover
	ProveRotation(ctx context.Context, size int64) (rot audit.KeyChange, ok bool, err error)
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

// Name returns the witness's key name.
func (c *Client) Name() string {
	if c.Key == nil {
		return c.URL
	}
	return c.Key.Name()
}

// Submit asks the witness to cosign the signed checkpoint note of the
// log's first size records, proving it consistent with what the witness
// cosigned before with proofs from tree, and returns its cosignature line (checked
// against c.Key). When the witness's last size is unknown or stale it asks
// again with the size the witness gave. When the witness does not trust
// the checkpoint's key (403) and tree is a RotationProver whose log records
// a key rotation, it asks again on add-rotation with that rotation. A
// refusal is a *RefusedError.
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
	var rot *audit.KeyChange
	for attempt := 0; attempt < 4; attempt++ {
		if c.known > cp.Size {
			return nil, &RefusedError{Status: http.StatusConflict, Size: c.known, Reason: fmt.Sprintf("the log shrank: the witness has cosigned %d records, more than this checkpoint's %d", c.known, cp.Size)}
		}
		var proof tlog.TreeProof
		if c.known > 0 {
			if proof, err = tree.ProveTree(ctx, cp.Size, c.known); err != nil {
				return nil, err
			}
		}
		req := audit.AddCheckpoint{OldSize: c.known, Proof: proof, Note: signed}
		path, body := "/add-checkpoint", req.Marshal()
		if rot != nil {
			path, body = "/add-rotation", audit.MarshalRotated(*rot, req)
		}
		status, reply, reason, err := c.post(ctx, path, body)
		if err != nil {
			return nil, err
		}
		switch status {
		case http.StatusOK:
			line, err := cosignatureOf(cp, reply, c.Key)
			if err != nil {
				return nil, err
			}
			c.known = cp.Size
			return line, nil
		case http.StatusConflict:
			n, perr := strconv.ParseInt(strings.TrimSpace(string(reply)), 10, 64)
			if perr != nil || n < 0 {
				return nil, fmt.Errorf("witness: 409 without a size: %q", reply)
			}
			if n == c.known {
				if reason == "" && n == cp.Size {
					reason = fmt.Sprintf("the witness cosigned another tree of %d records (a fork)", n)
				}
				return nil, &RefusedError{Status: status, Size: n, Reason: reason}
			}
			c.known = n
		case http.StatusForbidden:
			rp, ok := tree.(RotationProver)
			if rot != nil || !ok {
				return nil, &RefusedError{Status: status, Reason: strings.TrimSpace(string(reply))}
			}
			kc, found, err := rp.ProveRotation(ctx, cp.Size)
			if err != nil {
				return nil, err
			}
			if !found {
				return nil, &RefusedError{Status: status, Reason: strings.TrimSpace(string(reply))}
			}
			rot = &kc
		default:
			return nil, &RefusedError{Status: status, Reason: strings.TrimSpace(string(reply))}
		}
	}
	return nil, &RefusedError{Status: http.StatusConflict, Reason: "the witness's size keeps changing"}
}

func (c *Client) post(ctx context.Context, path string, body []byte) (status int, reply []byte, reason string, err error) {
	hc := c.HTTP
	if hc == nil {
		// A redirect is the witness's answer, never an instruction to send
		// the checkpoint somewhere else: the 3xx is a refusal like any other.
		hc = &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+path, bytes.NewReader(body))
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

// cosignatureOf returns the line of key among the reply's cosignature
// lines. C2SP tlog-witness answers with one or more note signature lines
// (a witness may cosign with several keys) and its client ignores the
// lines of keys it does not know; a line of key that does not verify over
// cp, or no line of key, is an error.
func cosignatureOf(cp audit.Checkpoint, reply []byte, key *audit.Cosigner) ([]byte, error) {
	if key == nil {
		return nil, errors.New("witness: client has no witness key to check the reply")
	}
	if len(reply) == 0 || reply[len(reply)-1] != '\n' {
		return nil, fmt.Errorf("witness: reply is not a sequence of signature lines: %q", reply)
	}
	var found []byte
	for _, line := range bytes.SplitAfter(reply, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if !bytes.HasPrefix(line, []byte("— ")) {
			return nil, fmt.Errorf("witness: reply is not a sequence of signature lines: %q", reply)
		}
		// A note made of the text and the line opens only if the line is
		// key's and verifies; another key's line leaves it unverified.
		msg := append(append(cp.Text(), '\n'), line...)
		_, err := note.Open(msg, note.VerifierList(key.Verifier()))
		var unverified *note.UnverifiedNoteError
		switch {
		case errors.As(err, &unverified):
			continue
		case err != nil:
			return nil, fmt.Errorf("witness: reply does not verify: %w", err)
		}
		if found == nil {
			found = line
		}
	}
	if found == nil {
		return nil, fmt.Errorf("witness: reply holds no cosignature of %q", key.Name())
	}
	return found, nil
}
