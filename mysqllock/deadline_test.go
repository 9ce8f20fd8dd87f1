package mysqllock

import (
	"context"
	"database/sql"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/strategy"
)

// dialCounter counts the connections a pool opens.
type dialCounter struct{ n atomic.Int64 }

func (d *dialCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.n.Add(1)
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// countedDB opens a pool of at most conns connections on the shared
// server, whose dials d counts.
func countedDB(t *testing.T, d *dialCounter, conns int) *sqlx.DB {
	t.Helper()
	cfg := backendstest.SharedMySQL(t).Config()
	cfg.InterpolateParams = true
	cfg.DialFunc = d.dial // not part of a DSN: the pool is opened from cfg
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db
}

// deadlineRun is what calls under a deadline made of the pool and of the
// contract.
type deadlineRun struct {
	calls   int
	dials   int64
	classes map[error]int
	ok      int // acknowledged units
}

// runDeadlines makes calls calls of call, each under its own deadline d,
// from workers goroutines, on a pool that was warmed with workers
// connections first, and counts the dials they caused and each error class.
func runDeadlines(t *testing.T, d *dialCounter, workers, calls int, deadline time.Duration, call func(context.Context) error) deadlineRun {
	t.Helper()
	before := d.n.Load()
	var mu sync.Mutex
	run := deadlineRun{calls: calls, classes: map[error]int{}}
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(calls) {
				ctx, cancel := context.WithTimeout(t.Context(), deadline)
				err := call(ctx)
				cancel()
				mu.Lock()
				if err == nil {
					run.ok++
				} else {
					c := strategy.Contract(err)
					if c == nil {
						t.Errorf("not a contract error: %v", err)
					}
					run.classes[c]++
					if c == stockguard.ErrContention || c == stockguard.ErrUnavailable {
						t.Logf("%v", err)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Let detached statements finish and return their connections.
	time.Sleep(100 * time.Millisecond)
	run.dials = d.n.Load() - before
	return run
}

// A deadline that passed before anything was sent is the context's error,
// never a failed connection or a busy server; and calls whose deadline
// passes mid-request keep the pool's connections. Before supervised
// requests, 1µs deadlines gave ~96% ErrContention ("dial tcp … i/o
// timeout") and 1ms deadlines ~950 dials per 1,000 calls.
func TestDecrement_shortDeadlines(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxDials int64 // per 1,000 calls at 1ms
	}{
		{"atomic", 20},
		{"pessimistic", 20},
		{"optimistic", 20},
		{"segmented", 20},
		{"setstock", 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d dialCounter
			const workers = 8
			db := countedDB(t, &d, workers)
			table := newTable(t, db)
			const stock = 1_000_000
			var inv stockguard.Inventory
			var call func(ctx context.Context) error
			switch c.name {
			case "setstock":
				f, err := NewFencedStore(db, WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				inv = must.New(NewAtomic(db, WithTable(table))) // to stock the SKU
				call = func(ctx context.Context) error { return f.SetStock(ctx, "dl", stock) }
			case "segmented":
				if err := CreateSchema(t.Context(), db, WithTable(table)); err != nil {
					t.Fatal(err)
				}
				dropAtCleanup(t, db, SegmentsTable(table))
				inv = must.New(NewSegmented(db, WithTable(table)))
			default:
				inv = strategies(db, WithTable(table))[c.name]
			}
			if call == nil {
				call = func(ctx context.Context) error { return inv.Decrement(ctx, "dl", 1) }
			}
			if err := inv.SetStock(t.Context(), "dl", stock); err != nil {
				t.Fatal(err)
			}
			warm(t, db, workers)

			tiny := runDeadlines(t, &d, workers, 1000, time.Microsecond, call)
			t.Logf("1µs: %d calls, %d dials, %d ok, %v", tiny.calls, tiny.dials, tiny.ok, tiny.classes)
			short := runDeadlines(t, &d, workers, 1000, time.Millisecond, call)
			t.Logf("1ms: %d calls, %d dials, %d ok, %v", short.calls, short.dials, short.ok, short.classes)
			for _, r := range []deadlineRun{tiny, short} {
				for _, c := range []error{stockguard.ErrContention, stockguard.ErrUnavailable} {
					if r.classes[c] > 0 {
						t.Errorf("%d calls %v", r.classes[c], c)
					}
				}
			}
			// A 1µs deadline has nearly always passed before the first
			// statement; the rare call that started in time may finish.
			if n := tiny.classes[context.DeadlineExceeded]; n < tiny.calls*95/100 {
				t.Errorf("1µs deadlines: %d of %d calls context.DeadlineExceeded", n, tiny.calls)
			}
			if short.dials > c.maxDials {
				t.Errorf("1ms deadlines: %d dials per %d calls, want ≤ %d", short.dials, short.calls, c.maxDials)
			}
			if c.name == "setstock" {
				return
			}
			left, err := inv.Stock(t.Context(), "dl")
			if err != nil {
				t.Fatal(err)
			}
			ok := int64(tiny.ok + short.ok)
			unknown := int64(tiny.classes[stockguard.ErrOutcomeUnknown] + short.classes[stockguard.ErrOutcomeUnknown])
			if gone := stock - left; gone < ok || gone > ok+unknown {
				t.Errorf("%d units gone, %d acknowledged, %d unknown", gone, ok, unknown)
			}
		})
	}
}

// warm opens n connections in the pool and returns them to it.
func warm(t *testing.T, db *sqlx.DB, n int) {
	t.Helper()
	var conns []*sqlx.Conn
	for range n {
		c, err := db.Connx(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
}
