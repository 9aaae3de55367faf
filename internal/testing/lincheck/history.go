package lincheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// History records operations from many goroutines. Times are nanoseconds
// on the monotonic clock since the history began.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// NewHistory starts an empty history.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the current time of the history.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Add records one operation invoked at call. An unknown output (timeout) is
// recorded as a pending operation: its return is set past every other
// operation when the history is checked, so it may take effect at any
// point after its invocation.
func (h *History) Add(client int, call int64, in Input, out Output) {
	ret := h.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// Operations returns the recorded operations with the pending ones'
// returns set after every other operation.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var end int64
	for _, op := range h.ops {
		end = max(end, op.Return)
	}
	out := make([]porcupine.Operation, len(h.ops))
	for i, op := range h.ops {
		if op.Output.(Output).Unknown {
			op.Return = end + 1
		}
		out[i] = op
	}
	return out
}

// Len is the number of recorded operations.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Result is the outcome of Check.
type Result struct {
	OK         bool
	Operations int
	Partitions int
	Pending    int      // operations with an unknown outcome
	Undecided  []string // partitions the checker gave up on (timeout)
	Illegal    []string // partitions that are not linearizable
	// Visualizations are HTML files of the illegal partitions.
	Visualizations []string
}

// String summarizes the result in one line.
func (r Result) String() string {
	switch {
	case len(r.Illegal) > 0:
		return fmt.Sprintf("NOT linearizable: %d of %d resources (%s); see %s", len(r.Illegal), r.Partitions,
			strings.Join(r.Illegal, ", "), strings.Join(r.Visualizations, ", "))
	case len(r.Undecided) > 0:
		return fmt.Sprintf("undecided: checker timed out on %d of %d resources", len(r.Undecided), r.Partitions)
	}
	return fmt.Sprintf("linearizable (%d operations, %d pending, %d resources)", r.Operations, r.Pending, r.Partitions)
}

// Check checks ops against Model, all resources in parallel within
// timeout. When the history is not linearizable (or the checker runs out of
// time) each resource is checked again on its own, two at a time, to name
// the failing ones, and porcupine's visualization of each illegal one is
// written to dir (a temporary directory is made when dir is empty), with a
// text listing beside it.
func Check(ops []porcupine.Operation, timeout time.Duration, dir string) Result {
	res := Result{Operations: len(ops)}
	for _, op := range ops {
		if op.Output.(Output).Unknown {
			res.Pending++
		}
	}
	parts := partition(ops)
	res.Partitions = len(parts)
	model := Model()
	if porcupine.CheckOperationsTimeout(model, ops, timeout) == porcupine.Ok {
		res.OK = true
		return res
	}
	single := model
	single.Partition = nil
	type verdict struct {
		resource string
		r        porcupine.CheckResult
	}
	verdicts := make([]verdict, len(parts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2) // the machine is shared
	for i, p := range parts {
		wg.Add(1)
		go func(i int, p []porcupine.Operation) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			verdicts[i] = verdict{p[0].Input.(Input).Resource, porcupine.CheckOperationsTimeout(single, p, timeout/4)}
		}(i, p)
	}
	wg.Wait()
	for i, v := range verdicts {
		switch v.r {
		case porcupine.Illegal:
			res.Illegal = append(res.Illegal, v.resource)
			if dir == "" {
				dir, _ = os.MkdirTemp("", "lincheck-")
			}
			_, info := porcupine.CheckOperationsVerbose(single, parts[i], timeout/4)
			path := filepath.Join(dir, fmt.Sprintf("lin-%03d.html", len(res.Illegal)))
			if err := porcupine.VisualizePath(single, info, path); err == nil {
				res.Visualizations = append(res.Visualizations, path)
			}
			_ = os.WriteFile(strings.TrimSuffix(path, ".html")+".txt", []byte(Describe(parts[i])), 0o644)
		case porcupine.Unknown:
			res.Undecided = append(res.Undecided, v.resource)
		}
	}
	sort.Strings(res.Undecided)
	res.OK = len(res.Illegal) == 0 && len(res.Undecided) == 0
	return res
}

// Describe lists ops by invocation time, one line each: client, window in
// milliseconds, operation and output.
func Describe(ops []porcupine.Operation) string {
	ops = append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var b strings.Builder
	for _, op := range ops {
		ret := fmt.Sprintf("%.3f", float64(op.Return)/1e6)
		if op.Output.(Output).Unknown {
			ret = "?"
		}
		fmt.Fprintf(&b, "client %3d [%10.3f, %10s] %s\n", op.ClientId, float64(op.Call)/1e6, ret, describeOperation(op.Input, op.Output))
	}
	return b.String()
}

// BalanceViolations checks every balance a client saw: committed and held
// non-negative and committed + held <= limit.
func BalanceViolations(ops []porcupine.Operation) []string {
	var out []string
	for _, op := range ops {
		o := op.Output.(Output)
		if !o.HasBalance {
			continue
		}
		in := op.Input.(Input)
		limit := o.Limit
		if limit == 0 {
			limit = in.Limit
		}
		if o.Committed < 0 || o.Held < 0 || o.Committed+o.Held > limit {
			out = append(out, fmt.Sprintf("%s: %s saw committed=%d held=%d limit=%d", in.Resource, in.Kind, o.Committed, o.Held, limit))
		}
	}
	return out
}

type savedOp struct {
	Client int    `json:"client"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	Input  Input  `json:"input"`
	Output Output `json:"output"`
}

// Save writes ops as JSON (to check again later with Load and Check).
func Save(path string, ops []porcupine.Operation) error {
	out := make([]savedOp, len(ops))
	for i, op := range ops {
		out[i] = savedOp{op.ClientId, op.Call, op.Return, op.Input.(Input), op.Output.(Output)}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Load reads ops written by Save.
func Load(path string) ([]porcupine.Operation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var in []savedOp
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	ops := make([]porcupine.Operation, len(in))
	for i, o := range in {
		ops[i] = porcupine.Operation{ClientId: o.Client, Call: o.Call, Return: o.Return, Input: o.Input, Output: o.Output}
	}
	return ops, nil
}
