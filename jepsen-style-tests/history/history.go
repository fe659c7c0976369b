// Package history records what clients did during a Jepsen-style run: one
// Op per operation, with the client, the function and its input, the
// outcome (ok, fail or info) with its output, and the invoke and complete
// times in monotonic nanoseconds since the start of the test.
//
// Outcomes follow Jepsen:
//   - ok: the operation happened, with this output.
//   - fail: the operation certainly did not happen.
//   - info: unknown; it may have happened or not, now or at any later
//     time. Timeouts, connection errors after a request may have been
//     sent, and answers marked coordd-outcome: unknown are info, and so is
//     every operation still in flight when the run ends.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// Type is the outcome of an operation.
type Type string

const (
	Ok   Type = "ok"
	Fail Type = "fail"
	Info Type = "info"
)

// Op is one operation of a history.
type Op struct {
	Index    int             `json:"index"`
	Client   int             `json:"client"`
	F        string          `json:"f"`
	Input    json.RawMessage `json:"input,omitempty"`
	Type     Type            `json:"type"`
	Output   json.RawMessage `json:"output,omitempty"`
	Invoke   int64           `json:"invoke_ns"`
	Complete int64           `json:"complete_ns"`
	Error    string          `json:"error,omitempty"`
}

// Latency is Complete - Invoke.
func (o Op) Latency() time.Duration { return time.Duration(o.Complete - o.Invoke) }

// Recorder collects operations from concurrent clients.
type Recorder struct {
	t0 time.Time

	mu      sync.Mutex
	next    int
	done    []Op
	pending map[int]*Pending
	closed  bool
}

// NewRecorder starts a history whose clock is zero at t0 (the test start).
func NewRecorder(t0 time.Time) *Recorder {
	return &Recorder{t0: t0, pending: map[int]*Pending{}}
}

// Now is the monotonic time since t0 in nanoseconds.
func (r *Recorder) Now() int64 { return int64(time.Since(r.t0)) }

// T0 is the zero of the history's clock.
func (r *Recorder) T0() time.Time { return r.t0 }

// Pending is an invoked operation awaiting its outcome. Exactly one of Ok,
// Fail or Info should be called; later calls are ignored.
type Pending struct {
	r  *Recorder
	op Op
}

// Invoke records the invocation of f(input) by client. input is encoded as
// JSON at once.
func (r *Recorder) Invoke(client int, f string, input any) *Pending {
	in, err := json.Marshal(input)
	if err != nil {
		panic(fmt.Sprintf("history: encode input of %s: %v", f, err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &Pending{r: r, op: Op{Index: r.next, Client: client, F: f, Input: in}}
	r.next++
	p.op.Invoke = r.Now()
	if !r.closed {
		r.pending[p.op.Index] = p
	}
	return p
}

// Ok completes the operation with output.
func (p *Pending) Ok(output any) { p.complete(Ok, output, nil) }

// Fail completes the operation as certainly not applied.
func (p *Pending) Fail(err error) { p.complete(Fail, nil, err) }

// Info completes the operation with an unknown outcome.
func (p *Pending) Info(err error) { p.complete(Info, nil, err) }

func (p *Pending) complete(t Type, output any, err error) {
	now := p.r.Now()
	var out json.RawMessage
	if output != nil {
		b, e := json.Marshal(output)
		if e != nil {
			panic(fmt.Sprintf("history: encode output of %s: %v", p.op.F, e))
		}
		out = b
	}
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pending[p.op.Index]; !ok {
		return // already completed, or closed out as info
	}
	delete(r.pending, p.op.Index)
	op := p.op
	op.Type, op.Output, op.Complete = t, out, now
	if err != nil {
		op.Error = err.Error()
	}
	r.done = append(r.done, op)
}

// Close ends recording: every operation still pending becomes info,
// completing now. Later completions are ignored. It returns the history.
func (r *Recorder) Close() []Op {
	now := r.Now()
	r.mu.Lock()
	for _, p := range r.pending {
		op := p.op
		op.Type, op.Complete, op.Error = Info, now, "still pending when the run ended"
		r.done = append(r.done, op)
	}
	r.pending = map[int]*Pending{}
	r.closed = true
	r.mu.Unlock()
	return r.Ops()
}

// Ops returns the completed operations ordered by invocation.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := append([]Op(nil), r.done...)
	r.mu.Unlock()
	Sort(out)
	return out
}

// Sort orders ops by invoke time, then index.
func Sort(ops []Op) {
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].Invoke != ops[j].Invoke {
			return ops[i].Invoke < ops[j].Invoke
		}
		return ops[i].Index < ops[j].Index
	})
}

// Counts tallies ops by outcome.
type Counts struct {
	Total, Ok, Fail, Info int
	ByF                   map[string]int
}

// Count tallies ops.
func Count(ops []Op) Counts {
	c := Counts{ByF: map[string]int{}}
	for _, o := range ops {
		c.Total++
		c.ByF[o.F]++
		switch o.Type {
		case Ok:
			c.Ok++
		case Fail:
			c.Fail++
		case Info:
			c.Info++
		}
	}
	return c
}

// WriteJSONL writes one op per line.
func WriteJSONL(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, o := range ops {
		if err := enc.Encode(o); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadJSONL reads a history written by WriteJSONL.
func ReadJSONL(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var o Op
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		ops = append(ops, o)
	}
	return ops, sc.Err()
}
