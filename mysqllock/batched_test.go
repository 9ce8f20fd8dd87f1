package mysqllock

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
)

func TestBatched_conformance(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	stocktest.Run(t, func(*testing.T) stockguard.Inventory {
		return must.New(NewBatched(db, WithTable(table)))
	})
}

// stalled starts a request for sku that the held row stops in its UPDATE,
// so that the requests after it queue behind a write in flight. The
// caller releases the row.
func stalled(t *testing.T, db *sqlx.DB, b *Batched, table, sku string) (*sqlx.Tx, <-chan error) {
	t.Helper()
	tx := holdRow(t, db, table, sku, "FOR UPDATE")
	first := combinetest.Go(t.Context(), b, sku, 1)
	waitingOn(t, db, "UPDATE "+quote(table))
	return tx, first
}

// The requests queued behind a write go out together, in arrival order:
// the total does not fit, so each is granted while it fits — the later,
// smaller one too.
func TestBatched_Decrement_partialFillInArrivalOrder(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 7)
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	tx, first := stalled(t, db, b, table, "hot")
	var done []<-chan error
	for i, qty := range []int64{5, 4, 1} {
		done = append(done, combinetest.Go(t.Context(), b, "hot", qty))
		combinetest.Queued(t, b.writes, "hot", i+1)
	}
	tx.Rollback()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, stockguard.ErrInsufficientStock, nil} {
		if err := <-done[i]; want == nil && err != nil {
			t.Errorf("request %d: %v", i, err)
		} else if want != nil {
			contractOne(t, err, want)
		}
	}
	if qty, _ := level(t, db, table, "hot"); qty != 0 {
		t.Errorf("%d left, want 0", qty)
	}
	if got, want := b.Stats(), (BatchStats{Batches: 2, Requests: 4}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	combinetest.Idle(t, b.writes)
}

// A request whose context ends while it waits in the queue, or in a batch
// that has not been written yet, is dropped without effect; one whose
// batch is being written gets ErrOutcomeUnknown.
func TestBatched_Decrement_canceled(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		db := testDB(t, interpolate)
		table := newTable(t, db)
		mustSet(t, db, table, "hot", 10)
		b, err := NewBatched(db, WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		tx, first := stalled(t, db, b, table, "hot")
		ctx, cancel := context.WithCancel(t.Context())
		gone := combinetest.Go(ctx, b, "hot", 2)
		combinetest.Queued(t, b.writes, "hot", 1)
		last := combinetest.Go(t.Context(), b, "hot", 3)
		combinetest.Queued(t, b.writes, "hot", 2)
		cancel()
		contractOne(t, <-gone, context.Canceled)
		tx.Rollback()
		for _, done := range []<-chan error{first, last} {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if qty, _ := level(t, db, table, "hot"); qty != 6 {
			t.Errorf("%d left, want 6", qty)
		}
		if got := b.Stats().Requests; got != 2 {
			t.Errorf("%d requests written, want 2", got)
		}
		combinetest.Idle(t, b.writes)
	})
	t.Run("taken", func(t *testing.T) {
		// The drainer waits for the pool's only connection, held here.
		db := testDB(t, interpolate)
		db.SetMaxOpenConns(1)
		table := newTable(t, db)
		mustSet(t, db, table, "hot", 10)
		b, err := NewBatched(db, WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := db.Connx(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		gone := combinetest.Go(ctx, b, "hot", 2)
		combinetest.Queued(t, b.writes, "hot", 0) // taken by the drainer
		cancel()
		contractOne(t, <-gone, context.Canceled)
		conn.Close()
		combinetest.Idle(t, b.writes)
		if qty, _ := level(t, db, table, "hot"); qty != 10 {
			t.Errorf("%d left, want 10", qty)
		}
	})
	t.Run("written", func(t *testing.T) {
		db := testDB(t, interpolate)
		table := newTable(t, db)
		mustSet(t, db, table, "hot", 10)
		b, err := NewBatched(db, WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		tx := holdRow(t, db, table, "hot", "FOR UPDATE")
		ctx, cancel := context.WithCancel(t.Context())
		gone := combinetest.Go(ctx, b, "hot", 2)
		waitingOn(t, db, "UPDATE "+quote(table))
		cancel()
		contractOne(t, <-gone, stockguard.ErrOutcomeUnknown)
		tx.Rollback()
		// The drainer is free again, whatever became of the abandoned write.
		if err := b.Decrement(t.Context(), "hot", 1); err != nil {
			t.Fatal(err)
		}
		qty, _ := level(t, db, table, "hot")
		t.Logf("%d left: the abandoned write was %s", qty, map[bool]string{true: "applied", false: "not applied"}[qty == 7])
		combinetest.Idle(t, b.writes)
	})
}

// Every request of a batch for an unknown SKU learns so, and no row
// appears.
func TestBatched_Decrement_unknownSKU(t *testing.T) {
	db := testDB(t, interpolate)
	db.SetMaxOpenConns(1)
	table := newTable(t, db)
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Connx(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var done []<-chan error
	for i := range 4 {
		done = append(done, combinetest.Go(t.Context(), b, "ghost", int64(i+1)))
		combinetest.Queued(t, b.writes, "ghost", i)
	}
	conn.Close()
	for _, d := range done {
		contractOne(t, <-d, stockguard.ErrUnknownSKU)
	}
	var rows int
	if err := db.Get(&rows, "SELECT COUNT(*) FROM "+quote(table)); err != nil || rows != 0 {
		t.Fatalf("%d rows (%v), want none", rows, err)
	}
	if got, want := b.Stats(), (BatchStats{Batches: 2, Requests: 4}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// cutter dials connections that it can cut right after a chosen statement
// has been written: the server receives it, the client never hears back.
type cutter struct {
	armed atomic.Pointer[[]byte] // cut after the next write that contains it
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: conn, c: c}, nil
}

type cutConn struct {
	net.Conn
	c *cutter
}

func (cc *cutConn) Write(p []byte) (int, error) {
	n, err := cc.Conn.Write(p)
	if pat := cc.c.armed.Load(); pat != nil && bytes.Contains(p, *pat) && cc.c.armed.CompareAndSwap(pat, nil) {
		cc.Conn.Close()
	}
	return n, err
}

func (c *cutter) arm(stmt string) {
	b := []byte(stmt)
	c.armed.Store(&b)
}

// cutDB opens a pool on the shared server whose connections c can cut.
func cutDB(t *testing.T, c *cutter) *sqlx.DB {
	cfg := backendstest.SharedMySQL(t).Config()
	cfg.InterpolateParams = true // statements go out as text, so the cutter sees them
	cfg.DialFunc = c.dial
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	t.Cleanup(func() { db.Close() })
	return db
}

// When the reply to the statement that commits a batch is lost, every
// member the write carried gets ErrOutcomeUnknown: the server may well
// have committed. A member the fallback refused keeps its refusal.
func TestBatched_Decrement_commitLost(t *testing.T) {
	for _, c := range []struct {
		name    string
		stock   int64
		cut     string // the statement that commits the batch; TABLE stands for the table
		qtys    []int64
		want    []error
		granted int64
	}{
		// Total 5 fits: the conditional UPDATE, in autocommit, commits it.
		{"update", 100, "UPDATE TABLE", []int64{2, 3}, []error{stockguard.ErrOutcomeUnknown, stockguard.ErrOutcomeUnknown}, 5},
		// 3 left after the stalled request, total 5: granted 2 and 1 under the
		// row lock, 2 refused, then COMMIT.
		{"commit", 4, "COMMIT", []int64{2, 2, 1}, []error{stockguard.ErrOutcomeUnknown, stockguard.ErrInsufficientStock, stockguard.ErrOutcomeUnknown}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			side := testDB(t, interpolate)
			table := newTable(t, side)
			mustSet(t, side, table, "hot", c.stock)
			var cut cutter
			b, err := NewBatched(cutDB(t, &cut), WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			tx, first := stalled(t, side, b, table, "hot")
			var done []<-chan error
			for i, qty := range c.qtys {
				done = append(done, combinetest.Go(t.Context(), b, "hot", qty))
				combinetest.Queued(t, b.writes, "hot", i+1)
			}
			cut.arm(strings.ReplaceAll(c.cut, "TABLE", quote(table)))
			tx.Rollback()
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			for i, want := range c.want {
				contractOne(t, <-done[i], want)
			}
			if cut.armed.Load() != nil {
				t.Fatal("the statement was never cut")
			}
			time.Sleep(50 * time.Millisecond)
			qty, _ := level(t, side, table, "hot")
			if qty != c.stock-1 && qty != c.stock-1-c.granted {
				t.Fatalf("%d left of %d: neither all nor nothing of the batch's %d", qty, c.stock-1, c.granted)
			}
			t.Logf("%d left of %d: the server committed the batch: %t", qty, c.stock-1, qty < c.stock-1)
			// The batch's connection is discarded; the next one serves.
			if err := b.Decrement(t.Context(), "hot", 1); err != nil && !errors.Is(err, stockguard.ErrInsufficientStock) {
				t.Fatal(err)
			}
		})
	}
}

// Two instances, as two processes, combine their own buyers' requests; the
// database keeps the total exact, and batches of more than one form.
func TestBatched_Decrement_combinesAcrossInstances(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	insts := []*Batched{must.New(NewBatched(db, WithTable(table))), must.New(NewBatched(db, WithTable(table)))}
	combinetest.DrainMixed(t, []stockguard.Inventory{insts[0], insts[1]}, "hot", 3000)
	var s BatchStats
	for _, b := range insts {
		combinetest.Idle(t, b.writes)
		s.Batches += b.Stats().Batches
		s.Requests += b.Stats().Requests
	}
	combinetest.Combined(t, s.Batches, s.Requests)
}

func TestWithBatchSize_WithSegments(t *testing.T) {
	for _, c := range []struct {
		opt func(int) Option
		get func(options) int
		n   int
		ok  bool
	}{
		{WithBatchSize, func(o options) int { return o.batchSize }, 1, true},
		{WithBatchSize, func(o options) int { return o.batchSize }, 10_000, true},
		{WithBatchSize, func(o options) int { return o.batchSize }, 0, false},
		{WithBatchSize, func(o options) int { return o.batchSize }, 10_001, false},
		{WithSegments, func(o options) int { return o.segments }, 1, true},
		{WithSegments, func(o options) int { return o.segments }, 1024, true},
		{WithSegments, func(o options) int { return o.segments }, -1, false},
		{WithSegments, func(o options) int { return o.segments }, 1025, false},
	} {
		o := newOptions([]Option{c.opt(c.n)})
		if c.ok && (o.err != nil || c.get(o) != c.n) {
			t.Errorf("option(%d): %d, %v", c.n, c.get(o), o.err)
		}
		if !c.ok && !errors.Is(o.err, stockguard.ErrInvalidRequest) {
			t.Errorf("option(%d): %v is not ErrInvalidRequest", c.n, o.err)
		}
	}
}

// The batch size bounds what one write carries.
func TestBatched_Decrement_batchSizeBound(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 100)
	b, err := NewBatched(db, WithTable(table), WithBatchSize(2))
	if err != nil {
		t.Fatal(err)
	}
	tx, first := stalled(t, db, b, table, "hot")
	var done []<-chan error
	for i := range 5 {
		done = append(done, combinetest.Go(t.Context(), b, "hot", 1))
		combinetest.Queued(t, b.writes, "hot", i+1)
	}
	tx.Rollback()
	for _, d := range append(done, first) {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.Stats(), (BatchStats{Batches: 4, Requests: 6}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// A drainer's batch runs on the drainer's goroutine (pinnedInPlace), not a
// supervisor's: when every member leaves while its UPDATE waits for the
// row, each is answered ErrOutcomeUnknown at once, the UPDATE finishes on
// its connection once the row is free (no connection is lost, none
// dialled), and the drainer goes on.
func TestBatched_Decrement_abandonedBatchKeepsItsConnection(t *testing.T) {
	var d dialCounter
	const conns = 4 // at most in use at once: tx, the first UPDATE, tx2, waitingOn's query
	db := countedDB(t, &d, conns)
	table := newTable(t, db)
	mustSet(t, db, table, "hot", 10)
	b, err := NewBatched(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	tx, first := stalled(t, db, b, table, "hot")
	ctx, cancel := context.WithCancel(t.Context())
	queued := []<-chan error{combinetest.Go(ctx, b, "hot", 2), nil}
	combinetest.Queued(t, b.writes, "hot", 1)
	queued[1] = combinetest.Go(ctx, b, "hot", 3)
	combinetest.Queued(t, b.writes, "hot", 2)
	// A second locker queues on the row behind the first UPDATE, so that
	// the drainer's batch finds the row locked in its turn.
	tx2, err := db.BeginTxx(context.WithoutCancel(t.Context()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx2.Rollback() })
	locked := make(chan error, 1)
	go func() {
		var qty int64
		locked <- tx2.QueryRowx("SELECT qty FROM "+quote(table)+" WHERE sku = ? FOR UPDATE", "hot").Scan(&qty)
	}()
	waitingOn(t, db, "SELECT qty FROM "+quote(table))
	tx.Rollback()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	waitingOn(t, db, "UPDATE "+quote(table))
	dials := d.n.Load()
	cancel()
	for _, done := range queued {
		contractOne(t, <-done, stockguard.ErrOutcomeUnknown)
	}
	tx2.Rollback() // well within detachedGrace
	if err := b.Decrement(t.Context(), "hot", 1); err != nil {
		t.Fatal(err)
	}
	combinetest.Idle(t, b.writes)
	if qty, _ := level(t, db, table, "hot"); qty != 3 {
		t.Errorf("%d left, want 3: the abandoned batch's UPDATE finishes once the row is free", qty)
	}
	warm(t, db, conns) // the pool's every connection at once: a lost one is dialled again
	if n := d.n.Load() - dials; n != 0 {
		t.Errorf("%d connections dialled after the batch was abandoned, want 0", n)
	}
}
