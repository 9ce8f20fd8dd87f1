package combine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
)

// item is a test request: its id, the name Apart reads, and the outcome a
// write gives it.
type item struct {
	id     int
	name   string
	result error
}

// answer is Config.Answer for items: the write's error, else the item's
// own result.
func answer(v *item, err error) error {
	if err != nil {
		return err
	}
	return v.result
}

// stub is a Config.Write that hands every call to the test, which answers
// it with reply.
type stub struct{ calls chan *call }

type call struct {
	ctx   context.Context
	key   string
	batch *Batch[item]
	reply chan error
}

func (s *stub) write(ctx context.Context, key string, b *Batch[item]) error {
	c := &call{ctx: ctx, key: key, batch: b, reply: make(chan error)}
	s.calls <- c
	return <-c.reply
}

// next returns the next write, once it has begun.
func (s *stub) next(t *testing.T) *call {
	t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no write began")
		return nil
	}
}

// newStub returns a Combiner of batches of at most size items whose
// writes s hands to the test.
func newStub(size int, apart func(*item) string) (*Combiner[item], *stub) {
	s := &stub{calls: make(chan *call)}
	return New(Config[item]{Size: size, Write: s.write, Answer: answer, Apart: apart}), s
}

// ids claims c's members and returns their ids.
func ids(c *call) []int {
	var out []int
	for _, v := range c.batch.Members() {
		out = append(out, v.id)
	}
	return out
}

// do starts c.Do for v and returns where its answer will be.
func do(ctx context.Context, c *Combiner[item], key string, v item) <-chan error {
	done := make(chan error, 1)
	go func() { done <- c.Do(ctx, key, v) }()
	return done
}

// answered returns the answer on done.
func answered(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return nil
	}
}

func stats(c *Combiner[item]) [2]int64 {
	b, r := c.Stats()
	return [2]int64{b, r}
}

type ctxKey struct{}

// A request for an idle key is written alone, at once, on its caller's
// goroutine and context; then the key is forgotten.
func TestCombiner_Do_aloneOnCallersContext(t *testing.T) {
	errRefused := errors.New("refused")
	c := New(Config[item]{
		Size: 4,
		Write: func(ctx context.Context, key string, b *Batch[item]) error {
			if ctx.Value(ctxKey{}) != "caller" {
				return errors.New("not the caller's context")
			}
			if m := b.Members(); key != "k" || len(m) != 1 || m[0].id != 7 {
				return fmt.Errorf("write of %q for %v", key, m)
			}
			return nil
		},
		Answer: answer,
	})
	ctx := context.WithValue(t.Context(), ctxKey{}, "caller")
	if err := c.Do(ctx, "k", item{id: 7}); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "k", item{id: 7, result: errRefused}); !errors.Is(err, errRefused) {
		t.Fatalf("answer %v, want the item's own result", err)
	}
	if got := stats(c); got != [2]int64{2, 2} {
		t.Errorf("stats %v, want 2 writes of 1", got)
	}
	if n := c.Busy(); n != 0 {
		t.Errorf("%d keys busy after the writes returned", n)
	}
}

// Requests arriving while a key is written queue; one drainer writes them
// in arrival order, at most Size per batch, and forgets the key at the
// end. A queued request is not answered before its batch is written.
func TestCombiner_Do_batchesInArrivalOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		names []string // of the queued requests, ids 1…
		want  [][]int  // the drainer's batches
	}{
		{"one batch", 64, []string{"", "", "", ""}, [][]int{{1, 2, 3, 4}}},
		{"size bound", 2, []string{"", "", "", "", ""}, [][]int{{1, 2}, {3, 4}, {5}}},
		{"size 1", 1, []string{"", "", ""}, [][]int{{1}, {2}, {3}}},
		{"apart", 64, []string{"a", "b", "a", "", "a"}, [][]int{{1, 2, 4}, {3}, {5}}},
		{"apart and size", 2, []string{"a", "a", "b", "c"}, [][]int{{1, 3}, {2, 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := newStub(tc.size, func(v *item) string { return v.name })
			first := do(t.Context(), c, "k", item{id: 0})
			alone := s.next(t)
			var done []<-chan error
			for i, name := range tc.names {
				done = append(done, do(t.Context(), c, "k", item{id: i + 1, name: name, result: fmt.Errorf("item %d", i+1)}))
				combinetest.Queued(t, c, "k", i+1)
			}
			if got := ids(alone); !slices.Equal(got, []int{0}) {
				t.Fatalf("alone wrote %v", got)
			}
			alone.reply <- nil
			if err := answered(t, first); err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				w := s.next(t)
				if got := ids(w); !slices.Equal(got, want) {
					t.Fatalf("batch %v, want %v", got, want)
				}
				for _, id := range want {
					select {
					case err := <-done[id-1]:
						t.Fatalf("item %d answered (%v) before its write returned", id, err)
					default:
					}
				}
				w.reply <- nil
				for _, id := range want {
					if err := answered(t, done[id-1]); err == nil || err.Error() != fmt.Sprintf("item %d", id) {
						t.Errorf("item %d answered %v, want its own result", id, err)
					}
				}
			}
			combinetest.Idle(t, c)
			if got, want := stats(c), [2]int64{int64(1 + len(tc.want)), int64(1 + len(tc.names))}; got != want {
				t.Errorf("stats %v, want %v", got, want)
			}
		})
	}
}

// Keys are written independently: a write in flight for one does not
// hold up another.
func TestCombiner_Do_keysIndependent(t *testing.T) {
	c, s := newStub(4, nil)
	a := do(t.Context(), c, "a", item{id: 1})
	wa := s.next(t)
	b := do(t.Context(), c, "b", item{id: 2})
	wb := s.next(t)
	if wa.key == wb.key {
		t.Fatalf("both writes for %q", wa.key)
	}
	if n := c.Busy(); n != 2 {
		t.Errorf("%d keys busy, want 2", n)
	}
	wb.reply <- nil
	wa.reply <- nil
	for _, d := range []<-chan error{a, b} {
		if err := answered(t, d); err != nil {
			t.Fatal(err)
		}
	}
	combinetest.Idle(t, c)
}

// stalled starts a request for "k" whose write, alone, stays in flight
// until the test replies to it.
func stalled(t *testing.T, c *Combiner[item], s *stub) (*call, <-chan error) {
	t.Helper()
	done := do(t.Context(), c, "k", item{id: 0})
	w := s.next(t)
	w.batch.Members()
	return w, done
}

// A caller whose context ends before a write claims its request gets the
// context's error, and no write carries the request; once claimed, it
// gets ErrOutcomeUnknown, and the write goes on for the others.
func TestCombiner_Do_canceled(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at is where the canceled request (id 1, queued after id 2…) is
		// when its context ends: "queued", "taken" (in a batch whose write
		// has not claimed it yet) or "claimed".
		at      string
		want    error
		written []int // the drainer's batch
		counted [2]int64
	}{
		{"queued", "queued", context.Canceled, []int{2}, [2]int64{2, 2}},
		{"taken, not claimed", "taken", context.Canceled, []int{2}, [2]int64{2, 2}},
		{"claimed", "claimed", stockguard.ErrOutcomeUnknown, []int{1, 2}, [2]int64{2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := newStub(64, nil)
			alone, first := stalled(t, c, s)
			ctx, cancel := context.WithCancel(t.Context())
			t.Cleanup(cancel)
			gone := do(ctx, c, "k", item{id: 1})
			combinetest.Queued(t, c, "k", 1)
			other := do(t.Context(), c, "k", item{id: 2})
			combinetest.Queued(t, c, "k", 2)
			if tc.at == "queued" {
				cancel()
				if err := answered(t, gone); !errors.Is(err, tc.want) {
					t.Fatalf("canceled while queued: %v, want %v", err, tc.want)
				}
			}
			alone.reply <- nil
			if err := answered(t, first); err != nil {
				t.Fatal(err)
			}
			w := s.next(t)
			combinetest.Queued(t, c, "k", 0)
			if tc.at == "taken" {
				cancel()
				if err := answered(t, gone); !errors.Is(err, tc.want) {
					t.Fatalf("canceled in a batch not yet written: %v, want %v", err, tc.want)
				}
			}
			if got := ids(w); !slices.Equal(got, tc.written) {
				t.Fatalf("batch %v, want %v", got, tc.written)
			}
			if tc.at == "claimed" {
				cancel()
				err := answered(t, gone)
				if !errors.Is(err, tc.want) || errors.Is(err, context.Canceled) {
					t.Fatalf("canceled once claimed: %v, want only %v", err, tc.want)
				}
			}
			if err := w.ctx.Err(); err != nil {
				t.Fatalf("the batch's context ended (%v) while a member still waits", err)
			}
			w.reply <- nil
			if err := answered(t, other); err != nil {
				t.Fatal(err)
			}
			combinetest.Idle(t, c)
			if got := stats(c); got != tc.counted {
				t.Errorf("stats %v, want %v", got, tc.counted)
			}
		})
	}
}

// A request written alone is its caller's own write: its context ending
// does not abandon it, and the caller gets the write's answer.
func TestCombiner_Do_aloneWaitsForItsWrite(t *testing.T) {
	c, s := newStub(64, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := do(ctx, c, "k", item{id: 1})
	w := s.next(t)
	w.batch.Members()
	cancel()
	if err := w.ctx.Err(); err == nil {
		t.Fatal("the alone write does not run on its caller's context")
	}
	errLost := fmt.Errorf("%w: reply lost", stockguard.ErrOutcomeUnknown)
	w.reply <- errLost
	if err := answered(t, done); err != errLost {
		t.Fatalf("answer %v, want the write's %v", err, errLost)
	}
}

// A batch's context is its own: no caller's values, alive while any
// member waits, ended when every member has left, and ended once the write
// returns; Queued tells it from a request written alone.
func TestCombiner_Do_batchContext(t *testing.T) {
	c, s := newStub(64, nil)
	alone, first := stalled(t, c, s)
	if alone.batch.Queued() {
		t.Error("a request written alone reports a queued batch")
	}
	var cancels []context.CancelFunc
	var done []<-chan error
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "caller"))
		cancels = append(cancels, cancel)
		done = append(done, do(ctx, c, "k", item{id: i + 1}))
		combinetest.Queued(t, c, "k", i+1)
	}
	alone.reply <- nil
	answered(t, first)
	w := s.next(t)
	ids(w)
	if w.ctx.Value(ctxKey{}) != nil {
		t.Error("the batch's write sees a caller's context")
	}
	if !w.batch.Queued() {
		t.Error("a drainer's batch does not report itself queued")
	}
	cancels[0]()
	answered(t, done[0])
	if err := w.ctx.Err(); err != nil {
		t.Fatalf("the batch's context ended (%v) with a member still waiting", err)
	}
	cancels[1]()
	answered(t, done[1])
	select {
	case <-w.ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the batch's context lives on after every member left")
	}
	w.reply <- nil
	combinetest.Idle(t, c)

	// A batch whose members all wait ends its context when the write
	// returns.
	alone, first = stalled(t, c, s)
	last := do(t.Context(), c, "k", item{id: 3})
	combinetest.Queued(t, c, "k", 1)
	alone.reply <- nil
	answered(t, first)
	w = s.next(t)
	ids(w)
	w.reply <- nil
	answered(t, last)
	combinetest.Idle(t, c)
	if w.ctx.Err() == nil {
		t.Error("the batch's context lives on after its write returned")
	}
}

// A write that fails before claiming anyone applied nothing: each
// request still waiting gets its error, and the batch is not counted.
func TestCombiner_Do_errorBeforeClaim(t *testing.T) {
	c, s := newStub(64, nil)
	alone, first := stalled(t, c, s)
	var done []<-chan error
	for i := range 3 {
		done = append(done, do(t.Context(), c, "k", item{id: i + 1}))
		combinetest.Queued(t, c, "k", i+1)
	}
	alone.reply <- nil
	answered(t, first)
	w := s.next(t)
	errDown := fmt.Errorf("%w: no connection", stockguard.ErrUnavailable)
	w.reply <- errDown
	for i, d := range done {
		if err := answered(t, d); err != errDown {
			t.Errorf("request %d: %v, want %v", i+1, err, errDown)
		}
	}
	combinetest.Idle(t, c)
	if got := stats(c); got != [2]int64{1, 1} {
		t.Errorf("stats %v, want only the alone write", got)
	}
}

// A write that tries again claims once: its members stay the same, and a
// member that gives up between attempts was written already.
func TestCombiner_Do_retryKeepsMembers(t *testing.T) {
	c, s := newStub(64, nil)
	alone, first := stalled(t, c, s)
	ctx, cancel := context.WithCancel(t.Context())
	gone := do(ctx, c, "k", item{id: 1})
	combinetest.Queued(t, c, "k", 1)
	stay := do(t.Context(), c, "k", item{id: 2})
	combinetest.Queued(t, c, "k", 2)
	alone.reply <- nil
	answered(t, first)
	w := s.next(t)
	if got := ids(w); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("first attempt %v", got)
	}
	cancel()
	if err := answered(t, gone); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("left between attempts: %v, want ErrOutcomeUnknown", err)
	}
	if got := ids(w); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("second attempt %v, want the same members", got)
	}
	w.reply <- nil
	if err := answered(t, stay); err != nil {
		t.Fatal(err)
	}
	if got := stats(c); got != [2]int64{2, 3} {
		t.Errorf("stats %v, want %v", got, [2]int64{2, 3})
	}
}

// abandon's answer by where the request is when its context ends, and
// whether the batch's write may go on.
func TestCombiner_abandon(t *testing.T) {
	errAnswer := errors.New("the write's answer")
	for _, tc := range []struct {
		name     string
		state    int32
		inBatch  bool
		answered bool // the answer is there when the caller looks
		want     error
		state2   int32 // the request's state afterwards
		left     bool  // the caller left the batch
	}{
		{"queued", waiting, false, false, context.Canceled, abandoned, false},
		{"taken, not claimed", waiting, true, false, context.Canceled, abandoned, true},
		{"claimed, no answer yet", claimed, true, false, stockguard.ErrOutcomeUnknown, claimed, true},
		{"claimed, answered", claimed, true, true, errAnswer, claimed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config[item]{Size: 1, Answer: answer})
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			r := &request[item]{done: make(chan error, 1)}
			r.state.Store(tc.state)
			var bt *Batch[item]
			if tc.inBatch {
				bt = &Batch[item]{}
				bt.ctx, bt.cancel = context.WithCancel(t.Context())
				defer bt.cancel()
				bt.live.Store(2)
				r.batch = bt
			}
			if tc.answered {
				r.done <- errAnswer
			}
			err := c.abandon(ctx, r)
			if !errors.Is(err, tc.want) {
				t.Errorf("abandon: %v, want %v", err, tc.want)
			}
			if tc.want == stockguard.ErrOutcomeUnknown && errors.Is(err, context.Canceled) {
				t.Errorf("abandon: %v also matches the context's error", err)
			}
			if got := r.state.Load(); got != tc.state2 {
				t.Errorf("state %d, want %d", got, tc.state2)
			}
			if bt != nil {
				if left := bt.live.Load() == 1; left != tc.left {
					t.Errorf("left the batch: %t, want %t", left, tc.left)
				}
			}
			// An abandoned request can no longer be claimed; a claimed one
			// stays claimed.
			if got, want := r.claim(), tc.state2 == claimed; got != want {
				t.Errorf("claim after abandon: %t, want %t", got, want)
			}
		})
	}
}

// Many callers over a few keys, some giving up at random: each request is
// answered once; one answered with its context's error was never written,
// one answered nil or ErrOutcomeUnknown was written exactly once; the
// counts add up and every key is forgotten at the end.
func TestCombiner_Do_concurrent(t *testing.T) {
	const callers, each, size = 32, 100, 8
	var mu sync.Mutex
	written := map[int]int{} // item id → writes that carried it
	inFlight := map[string]bool{}
	c := New(Config[item]{
		Size: size,
		Write: func(ctx context.Context, key string, b *Batch[item]) error {
			mu.Lock()
			if inFlight[key] {
				t.Errorf("two writes of %q at once", key)
			}
			inFlight[key] = true
			mu.Unlock()
			defer func() {
				mu.Lock()
				inFlight[key] = false
				mu.Unlock()
			}()
			time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
			m := slices.Clone(b.Members())
			if len(m) > size {
				t.Errorf("a batch of %d", len(m))
			}
			if rand.IntN(4) == 0 { // tried again: the same members
				if again := b.Members(); !slices.Equal(again, m) {
					t.Errorf("second attempt %v, first %v", again, m)
				}
			}
			mu.Lock()
			for _, v := range m {
				written[v.id]++
			}
			mu.Unlock()
			time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
			return nil
		},
		Answer: answer,
	})
	answers := make([]error, callers*each)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				id := g*each + i
				ctx, cancel := context.WithCancel(t.Context())
				if rand.IntN(3) == 0 {
					time.AfterFunc(time.Duration(rand.IntN(300))*time.Microsecond, cancel)
				}
				answers[id] = c.Do(ctx, fmt.Sprintf("k%d", id%3), item{id: id})
				cancel()
			}
		})
	}
	wg.Wait()
	combinetest.Idle(t, c)
	var sent int64
	for id, err := range answers {
		n := written[id]
		sent += int64(n)
		switch {
		case err == nil, errors.Is(err, stockguard.ErrOutcomeUnknown):
			if n != 1 {
				t.Errorf("item %d answered %v, written %d times", id, err, n)
			}
		case errors.Is(err, context.Canceled):
			if n != 0 {
				t.Errorf("item %d answered %v, written %d times", id, err, n)
			}
		default:
			t.Errorf("item %d answered %v", id, err)
		}
	}
	batches, requests := c.Stats()
	if requests != sent {
		t.Errorf("counted %d requests, %d written", requests, sent)
	}
	t.Logf("%d of %d requests written in %d batches", sent, len(answers), batches)
}

// A Write may run on after it returned — a supervised statement goes on
// after every member gave up and the batch context ended — and call
// Members late, after the drainer moved on. The batch must still be its
// own: Members then claims nothing (a drainer that reused the batch's
// slices made it read nil and crash, or claim the next batch's requests).
func TestCombiner_Members_lateCallAfterWriteReturned(t *testing.T) {
	released, free := make(chan struct{}), make(chan struct{})
	late := make(chan *Batch[item], 1)
	var writes sync.Mutex
	n := 0
	c := New(Config[item]{Size: 8, Answer: answer, Write: func(ctx context.Context, key string, b *Batch[item]) error {
		writes.Lock()
		n++
		first := n == 1
		writes.Unlock()
		if first { // alone: keeps the key busy until the test lets go
			close(released)
			<-free
			b.Members()
			return nil
		}
		<-ctx.Done() // every member gave up: answered at once, as supervise does
		late <- b
		return ctx.Err()
	}})
	ctx := t.Context()
	go c.Do(ctx, "k", item{id: 0})
	<-released
	gaveUp := make(chan error, 2)
	var cancels []context.CancelFunc
	for id := 1; id <= 2; id++ {
		cctx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		go func() { gaveUp <- c.Do(cctx, "k", item{id: id}) }()
		combinetest.Queued(t, c, "k", id)
	}
	close(free)
	combinetest.Queued(t, c, "k", 0) // the drainer took both
	for _, cancel := range cancels {
		cancel()
	}
	for range 2 {
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("a request given up before its write: %v, want context.Canceled", err)
		}
	}
	b := <-late
	combinetest.Idle(t, c) // the drainer is done with the batch
	if m := b.Members(); len(m) != 0 {
		t.Fatalf("late Members = %v, want none: both members gave up", m)
	}
}

// The callers a batch answers and that call again at once join the next
// batch, with those that queued during the write, instead of leaving it
// to whoever queued meanwhile: callers in a loop are not split into two
// halves that take turns. One P, so that the answered callers run only
// when the drainer lets them.
func TestCombiner_Do_answeredCallersJoinTheNextBatch(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const callers, calls = 8, 100
	var finished atomic.Int64 // callers done with their calls
	var c *Combiner[item]
	c = New(Config[item]{
		Size: 64,
		Write: func(_ context.Context, _ string, b *Batch[item]) error {
			// Every caller outside this batch with calls left is back in the
			// queue before the write returns — waited for, not slept for,
			// so that a stalled thread cannot make it otherwise.
			out := callers - len(b.Members())
			for deadline := time.Now().Add(30 * time.Second); c.Pending("k") != out-int(finished.Load()); runtime.Gosched() {
				if time.Now().After(deadline) { // a hang guard only
					t.Errorf("%d requests queued, want %d", c.Pending("k"), out-int(finished.Load()))
					break
				}
			}
			return nil
		},
		Answer: answer,
	})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			defer finished.Add(1)
			for range calls {
				if err := c.Do(t.Context(), "k", item{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	batches, requests := c.Stats()
	if mean := float64(requests) / float64(batches); mean < 0.75*callers {
		t.Errorf("%.1f requests per batch from %d callers in a loop, want ≥ %.0f", mean, callers, 0.75*callers)
	}
}
