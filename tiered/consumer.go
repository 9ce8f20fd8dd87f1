package tiered

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/redisx"
	"github.com/stockguard/stockguard/strategy"
)

// Consumer applies the entries of a Queue to the back, in batches, and
// acknowledges each only after the back committed it: a consumer that
// dies between the two leaves the entry pending, another (or itself,
// restarted) claims it once idle for WithClaimIdle, and the back's ledger
// makes the second application a no-op. Entries of one order are applied
// in queue order; entries of different orders concurrently (WithApplyWorkers).
//
// An entry the back refuses for now — a take short of stock, a return of
// an order it has not taken yet (entries of other orders, or of another
// consumer, applied out of order) — stays pending and is tried again after
// the rest of its batch and then every 100 ms. One the back refuses for
// good (ErrOrderMismatch: the back has the ID for another order) stays
// pending too and is counted Stuck; the Reconciler reports it. While the
// back cannot serve (ErrUnavailable, ErrContention, ErrOutcomeUnknown) the
// Consumer retries the same entry with a backoff up to a second: the front
// keeps selling, the backlog grows, and drains when the back is back.
//
// A Consumer is for one goroutine: Run it, or call Step.
type Consumer struct {
	q    Queue
	back stockguard.Orders
	name string
	o    options

	// fence is the name of the back's fence (the stream's key; "" for a
	// Queue's consumer), view the back as the entries of epoch are
	// applied to it: fenced at the epoch's number (see backView), and
	// fenced is set when the back refused a write of the view.
	fence  string
	view   strategy.FencedOrders
	fenced atomic.Bool

	deferred  map[string]Entry // own pending entries the back refused, for now or for good
	stuck     map[string]bool  // those refused for good
	epoch     string           // the front's epoch deferred's entries were read under
	lastRetry time.Time

	mu    sync.Mutex
	stats Stats
	lag   *hdrhistogram.Histogram // µs from appended to committed

	// hook, set by tests, is called at "read" (entries in hand, nothing
	// applied) and "committed" (the back committed them, none
	// acknowledged); an error stops the Step there, as if the consumer had
	// died.
	hook func(point string) error
	// now is the clock that paces retries; tests set it.
	now func() time.Time
}

// Stats are a Consumer's counts since it was made.
type Stats struct {
	Applied  int64 // entries the back committed and the queue acknowledged
	Claimed  int64 // entries claimed from an idle consumer (redeliveries)
	Deferred int64 // times an entry was left for later: the back refused it for now
	Stuck    int64 // entries the back refuses for good, pending now
	Pending  int64 // entries this consumer holds unacknowledged now
	// FrontLost is how many Steps found the front had lost its data
	// (ErrFrontLost), or a new epoch since the last Step (the front was lost
	// and recovered in between).
	FrontLost int64
	// Dropped is how many entries of a lost front this consumer had in hand
	// and dropped, unapplied or unacknowledged: they were the lost front's,
	// and Recover re-seeds the front from the back without them.
	Dropped int64
	// Busy is the time spent in Steps that acknowledged entries: Applied /
	// Busy is the back's sustained rate while there was work.
	Busy time.Duration
	// LagP50, LagP99 and LagMax are how long applied entries took from
	// the front's append to the back's commit, by the front's clock and
	// this process's (the same machine's, or synchronized).
	LagP50, LagP99, LagMax time.Duration
}

// NewConsumer returns a Consumer of the stream of the Orders New builds
// with the same WithPrefix, applying to back. It reads the options
// WithPrefix, WithGroup, WithConsumerName, WithBatch, WithApplyWorkers,
// WithClaimIdle, WithStopGrace and WithReplicaAck. It creates nothing: until
// the front is set up (Orders.Setup), its Steps return ErrFrontLost.
func NewConsumer(rdb redis.UniversalClient, back stockguard.Orders, opts ...Option) (*Consumer, error) {
	o, err := consumerOptions("NewConsumer", readsConsumer, back, opts)
	if err != nil {
		return nil, err
	}
	q := NewStreams(rdb, StreamKey(o.prefix), o.group)
	q.ack, q.recheck = o.ack, o.claimIdle
	c := consumerOf(q, back, o)
	c.fence = q.stream
	return c, nil
}

// NewQueueConsumer returns a Consumer of q applying to back. It reads the
// options WithConsumerName, WithBatch, WithApplyWorkers, WithClaimIdle and
// WithStopGrace;
// q's Read and Claim must return only entries a failover of the front
// keeps (WithReplicaAck does that for NewConsumer's stream).
func NewQueueConsumer(q Queue, back stockguard.Orders, opts ...Option) (*Consumer, error) {
	o, err := consumerOptions("NewQueueConsumer", readsQueueConsumer, back, opts)
	if err != nil {
		return nil, err
	}
	return consumerOf(q, back, o), nil
}

// consumerOptions parses opts for a consumer of back: an invalid option or
// a nil back is an error wrapping stockguard.ErrInvalidRequest.
func consumerOptions(ctor string, reads optionSet, back stockguard.Orders, opts []Option) (options, error) {
	o := newOptions(opts)
	o.only(ctor, reads)
	if back == nil {
		o.fail(errors.New("nil back"))
	}
	return o, o.err
}

func consumerOf(q Queue, back stockguard.Orders, o options) *Consumer {
	if o.consumer == "" {
		var b [6]byte
		rand.Read(b[:]) // documented never to return an error
		o.consumer = "c-" + hex.EncodeToString(b[:])
	}
	return &Consumer{
		q: q, back: back, view: back, name: o.consumer, o: o,
		deferred: map[string]Entry{},
		stuck:    map[string]bool{},
		lag:      hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3),
		now:      time.Now,
	}
}

// Name is the consumer's name within its group.
func (c *Consumer) Name() string { return c.name }

// Run applies entries until ctx ends; then the Step in hand finishes —
// its batch applied to the back and acknowledged — within WithStopGrace,
// no more is read, and Run returns nil. Errors of the queue (Redis
// unreachable) are retried with a backoff up to a second; only a queue
// error wrapping stockguard.ErrInvalidRequest stops Run early.
func (c *Consumer) Run(ctx context.Context) error {
	// Steps run detached from ctx: its end cutting a batch between the
	// back's commit and the acknowledgement would leave the batch pending
	// under this name, to be claimed WithClaimIdle later by another
	// consumer (a rollout of the service would delay every batch in hand
	// by that). The grace bounds the wait for a back that does not answer.
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		t := time.NewTimer(c.o.stopGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-work.Done():
		}
	})()
	backoff := backoffFirst
	for ctx.Err() == nil {
		if _, err := c.Step(work); err != nil && ctx.Err() == nil {
			if errors.Is(err, stockguard.ErrInvalidRequest) {
				return err
			}
			redisx.Sleep(ctx, backoff) // the loop checks the context
			backoff = min(2*backoff, backoffMax)
			continue
		}
		backoff = backoffFirst
	}
	return nil
}

// Step runs one round: claims entries idle past WithClaimIdle, retries
// entries left for later when due, reads new ones (waiting up to 200 ms
// when there is nothing else to do), applies them all to the back and
// acknowledges those it committed. It returns how many it acknowledged,
// and an error of the queue (ErrFrontLost when the front lost its data:
// its group or epoch key is gone, or Recover runs; the Consumer waits for
// Recover), or the context's.
//
// Everything a Step does carries the epoch its reads found: it sends
// entries to the back only until WithApplyLease has passed since it began
// (Recover waits that long before it reads the back), and acknowledges
// them only if the front still has that epoch. Entries in hand of another
// epoch — a front lost and recovered since they were read — are dropped,
// never applied or acknowledged (Stats.Dropped, Stats.FrontLost). Against a
// back that is a strategy.Fencer (and a Consumer of NewConsumer), it writes
// through the back's view fenced at the epoch's number, so that a write the
// network delivers after the lease changes nothing once Recover has moved
// the fence: such a refusal (strategy.ErrFenced) ends the Step with
// ErrFrontLost, and the entries in hand are dropped.
func (c *Consumer) Step(ctx context.Context) (int, error) {
	// The lease starts before the epoch is read, so it ends before
	// Recover's wait, which starts after the epoch changed.
	lease := time.Now().Add(c.o.lease)
	claimed, epoch, err := c.q.Claim(ctx, c.name, c.o.claimIdle, c.o.batch)
	if err != nil {
		return 0, c.failed(err)
	}
	if epoch != c.epoch {
		if c.epoch != "" {
			c.drop()
		}
		c.epoch = epoch
		c.view = backView(c.back, c.fence, epoch)
	}
	// Entries left for later are tried again every retryEvery, whether
	// they are in hand already or come back by a claim or a read: a batch
	// the back keeps refusing does not go to it in a loop.
	due := len(c.deferred) > 0 && c.now().Sub(c.lastRetry) >= retryEvery
	var work []Entry
	seen := map[string]bool{}
	add := func(e Entry) {
		if !seen[e.ID] {
			seen[e.ID] = true
			work = append(work, e)
		}
	}
	fresh := 0
	for _, e := range claimed {
		if _, mine := c.deferred[e.ID]; !mine {
			fresh++
			add(e)
		}
	}
	c.count(func(s *Stats) { s.Claimed += int64(fresh) })
	block := readBlock
	if len(work) > 0 || due {
		block = -1 // do not wait: there is work in hand
	}
	read, rEpoch, err := c.q.Read(ctx, c.name, c.o.batch, block)
	if err == nil && rEpoch != epoch {
		err = fmt.Errorf("%w: the front's epoch changed from %s to %s within a step", ErrFrontLost, epoch, rEpoch)
	}
	if err != nil && (len(work) == 0 && !due || errors.Is(err, ErrFrontLost)) {
		return 0, c.failed(err)
	}
	for _, e := range read {
		if _, mine := c.deferred[e.ID]; !mine {
			add(e)
		}
	}
	// An order's entries left for later go with any entry of the order in
	// hand, before it: a return never lands while its take waits.
	orders := map[string]bool{}
	for _, e := range work {
		orders[e.Order] = true
	}
	for _, e := range c.deferred {
		if due || orders[e.Order] {
			add(e)
		}
	}
	if due {
		c.lastRetry = c.now()
	}
	if len(work) == 0 {
		return 0, nil
	}
	if c.hook != nil {
		if err := c.hook("read"); err != nil {
			return 0, err
		}
	}
	start := c.now()
	leased, cancel := context.WithDeadline(ctx, lease)
	done, later, stuck := c.apply(leased, work)
	cancel()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if c.fenced.Swap(false) {
		// A newer epoch took the back over: the entries the back did not
		// commit, in hand or left for later, are the lost front's, dropped
		// and counted (Stats.Dropped); those it committed before are the
		// back's, which Recover read after them.
		for _, e := range append(later, stuck...) {
			c.deferred[e.ID] = e
		}
		return 0, c.failed(errFenced(epoch))
	}
	if len(c.deferred) == 0 {
		c.lastRetry = c.now() // the first entries left for later wait retryEvery
	}
	for _, e := range later {
		c.deferred[e.ID] = e
	}
	for _, e := range stuck {
		c.deferred[e.ID] = e
		c.stuck[e.ID] = true
	}
	if c.hook != nil {
		if err := c.hook("committed"); err != nil {
			return 0, err
		}
	}
	if err := c.q.Ack(ctx, epoch, done...); err != nil {
		// Pending: applied again, a no-op, once read back or claimed; or
		// the front's epoch changed and they are dropped.
		return 0, c.failed(err)
	}
	now := c.now()
	c.count(func(s *Stats) {
		s.Applied += int64(len(done))
		s.Deferred += int64(len(later))
		for _, e := range done {
			delete(c.deferred, e.ID)
			delete(c.stuck, e.ID)
			c.lag.RecordValue(max(1, now.Sub(e.Appended).Microseconds()))
		}
		s.Stuck = int64(len(c.stuck))
		s.Pending = int64(len(c.deferred))
		if len(done) > 0 {
			s.Busy += now.Sub(start)
		}
	})
	return len(done), err
}

// failed is Step's error err of the queue: on ErrFrontLost the entries
// left for later are dropped and the loss is counted.
func (c *Consumer) failed(err error) error {
	if errors.Is(err, ErrFrontLost) {
		c.drop()
		c.epoch = ""
	}
	return err
}

// drop drops the entries left for later, which were read under an epoch the
// front no longer has: the front that had them is gone, and Recover
// re-seeds it from the back without them. It counts the loss.
func (c *Consumer) drop() {
	n := len(c.deferred)
	clear(c.deferred)
	clear(c.stuck)
	c.count(func(s *Stats) {
		s.FrontLost++
		s.Dropped += int64(n)
		s.Stuck, s.Pending = 0, 0
	})
}

// Stats returns the consumer's counts so far.
func (c *Consumer) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.LagP50 = time.Duration(c.lag.ValueAtQuantile(50)) * time.Microsecond
	s.LagP99 = time.Duration(c.lag.ValueAtQuantile(99)) * time.Microsecond
	s.LagMax = time.Duration(c.lag.Max()) * time.Microsecond
	return s
}

func (c *Consumer) count(f func(*Stats)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.stats)
}

// outcome is what applying one entry to the back came to.
type outcome int

const (
	applied outcome = iota // committed now, or before (a no-op)
	later                  // refused for now: try again after other entries
	stuck                  // refused for good
)

// apply applies work to the back and returns the entries committed, those
// refused for now, and those refused for good. The entries go in waves,
// each wave's Returns first and then its Takes, each part concurrently: an
// entry goes once the entries of its order before it are applied, and a
// Take whose SKU's level on the front right after it (Entry.Left) was
// below the units of the Returns of work before it on that SKU not applied
// yet goes once they are applied or refused: it may need their units. A
// Take that overtook such a Return could take the units that a Take before
// that Return needs, and that Take, refused, would hold back its own
// order's Return for good. An entry behind one of its order refused is
// left for later with it.
func (c *Consumer) apply(ctx context.Context, work []Entry) (done, retry, refused []Entry) {
	slices.SortFunc(work, func(a, b Entry) int { return compareIDs(a.ID, b.ID) })
	const pending outcome = -1
	results := make([]outcome, len(work))
	for i := range results {
		results[i] = pending
	}
	returns := map[string][]int{}  // per SKU, the indexes of work's Returns
	prev := make([]int, len(work)) // the index of the entry of its order before it; -1 none
	last := map[string]int{}
	for i, e := range work {
		prev[i] = -1
		if j, ok := last[e.Order]; ok {
			prev[i] = j
		}
		last[e.Order] = i
		if e.Op == OpReturn {
			for _, l := range e.Lines {
				returns[l.SKU] = append(returns[l.SKU], i)
			}
		}
	}
	// ready reports whether work[i] may go now (wait false), or must be
	// left for later (both false): an entry of its order before it was
	// refused. The entry of its order right before it went only once the
	// ones before that were applied, so it alone is looked at.
	ready := func(i int) (ok, wait bool) {
		e := work[i]
		if j := prev[i]; j >= 0 {
			switch results[j] {
			case pending:
				return false, true
			case applied:
			default:
				return false, false
			}
		}
		if e.Op != OpTake {
			return true, false
		}
		for _, l := range e.Lines {
			var back int64 // the units of the Returns before it still to land
			for _, j := range returns[l.SKU] {
				if j < i && results[j] == pending {
					back += qtyOf(work[j].Lines, l.SKU)
				}
			}
			if left, ok := e.Left[l.SKU]; back > 0 && (!ok || left < back) {
				return false, true
			}
		}
		return true, false
	}
	for ctx.Err() == nil && !c.fenced.Load() {
		moved := false
		for _, op := range []Op{OpReturn, OpTake} {
			var wave []int
			for i, e := range work {
				if results[i] != pending || e.Op != op && (e.Op == OpTake || e.Op == OpReturn) {
					continue
				}
				switch ok, wait := ready(i); {
				case ok:
					wave = append(wave, i)
				case !wait:
					results[i] = later // behind an entry refused or not in hand
					moved = true
				}
			}
			c.applyAll(ctx, work, wave, results)
			moved = moved || len(wave) > 0
		}
		if !moved {
			break
		}
	}
	for i, e := range work {
		switch results[i] {
		case applied:
			done = append(done, e)
		case later, pending:
			retry = append(retry, e)
		default:
			refused = append(refused, e)
		}
	}
	return done, retry, refused
}

// qtyOf is the quantity of sku's line in lines, 0 for none.
func qtyOf(lines []stockguard.Line, sku string) int64 {
	for _, l := range lines {
		if l.SKU == sku {
			return l.Qty
		}
	}
	return 0
}

// applyAll applies the entries of work at the indexes wave concurrently,
// WithApplyWorkers at most, and puts their outcomes in results.
func (c *Consumer) applyAll(ctx context.Context, work []Entry, wave []int, results []outcome) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c.o.workers, len(wave)) {
		wg.Go(func() {
			for i := range next {
				results[i] = c.applyOne(ctx, work[i])
			}
		})
	}
	for _, i := range wave {
		next <- i
	}
	close(next)
	wg.Wait()
}

// applyOne applies e to the back, retrying while the back cannot serve.
// A take the back has taken or closed already, and a return it has
// applied, are no-ops: the ledger answers them.
func (c *Consumer) applyOne(ctx context.Context, e Entry) outcome {
	backoff := backoffFirst
	for {
		var err error
		switch e.Op {
		case OpTake:
			err = c.view.Take(ctx, e.Order, e.Lines...)
			if errors.Is(err, stockguard.ErrOrderClosed) {
				err = nil
			}
		case OpReturn:
			err = c.returnOne(ctx, e)
		default:
			return stuck
		}
		switch {
		case err == nil:
			return applied
		case errors.Is(err, strategy.ErrFenced):
			c.fenced.Store(true)
			return later
		case errors.Is(err, stockguard.ErrInsufficientStock),
			errors.Is(err, stockguard.ErrUnknownSKU),
			errors.Is(err, stockguard.ErrUnknownOrder):
			return later
		case errors.Is(err, stockguard.ErrOrderMismatch),
			errors.Is(err, stockguard.ErrInvalidRequest):
			return stuck
		}
		if ctx.Err() != nil {
			return later
		}
		redisx.Sleep(ctx, backoff)
		backoff = min(2*backoff, backoffMax)
	}
}

// returnOne returns e's order on the back, only if the back took it with
// e's lines: under an ID reused after the front's retention, the back may
// hold another order, whose units are not the front's to give back.
func (c *Consumer) returnOne(ctx context.Context, e Entry) error {
	info, err := c.view.Order(ctx, e.Order)
	switch {
	case err != nil:
		return err
	case !slices.Equal(info.Lines, e.Lines):
		return fmt.Errorf("%w: tiered: the back has %q for other lines %v", stockguard.ErrOrderMismatch, e.Order, info.Lines)
	case info.State == stockguard.OrderReturned:
		return nil
	}
	return c.view.Return(ctx, e.Order)
}

// compareIDs orders stream IDs ("<ms>-<seq>") numerically.
func compareIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	num := func(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }
	return cmp.Or(cmp.Compare(num(am), num(bm)), cmp.Compare(num(as), num(bs)), strings.Compare(a, b))
}

// Drain waits until q holds no entry left to apply, polling their number
// (Queue.Len) every 10 ms, and returns nil; or, when ctx ends first, an
// error saying how many entries are still there, with the context's error.
// It never reads the entries: the consumer it waits for has them to apply.
func Drain(ctx context.Context, q Queue) error {
	left := int64(-1) // the number last read: a read cut by ctx's end has none
	for {
		n, err := q.Len(ctx)
		if err == nil && n == 0 {
			return nil
		}
		if err == nil {
			left = n
		}
		if ctx.Err() != nil {
			if left < 0 {
				return fmt.Errorf("tiered: drain: %w", cmp.Or(err, ctx.Err()))
			}
			return fmt.Errorf("tiered: drain: %d entries left: %w", left, ctx.Err())
		}
		redisx.Sleep(ctx, 10*time.Millisecond)
	}
}
