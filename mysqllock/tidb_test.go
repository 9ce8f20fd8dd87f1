package mysqllock

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
	"github.com/stockguard/stockguard/strategy"
)

// tidbDB opens a pool on the test binary's TiDB server (started from
// tidb-server, see scripts/build-tidb.sh), with interpolateParams.
func tidbDB(t testing.TB) *sqlx.DB {
	t.Helper()
	db := backendstest.TiDB(t, interpolate)
	db.SetMaxOpenConns(64)
	return db
}

// TestTiDB_conformance runs every strategy of the package through the
// conformance suites on TiDB, engine detection on (the default), and
// NewAtomic also with detection off (EngineMySQL: the optimistic
// autocommit UPDATE), which must be as correct, only slower.
func TestTiDB_conformance(t *testing.T) {
	db := tidbDB(t)
	for _, c := range []struct {
		name      string
		segmented bool
		new       func(table string) stockguard.Inventory
	}{
		{"atomic", false, func(table string) stockguard.Inventory { return must.New(NewAtomic(db, WithTable(table))) }},
		{"atomic-autocommit", false, func(table string) stockguard.Inventory {
			return must.New(NewAtomic(db, WithTable(table), WithEngine(EngineMySQL)))
		}},
		{"pessimistic", false, func(table string) stockguard.Inventory { return must.New(NewPessimistic(db, WithTable(table))) }},
		{"pessimistic-nowait", false, func(table string) stockguard.Inventory {
			return must.New(NewPessimistic(db, WithTable(table), WithLockMode(LockNoWait)))
		}},
		{"optimistic", false, func(table string) stockguard.Inventory { return must.New(NewOptimistic(db, WithTable(table))) }},
		{"segmented", true, func(table string) stockguard.Inventory { return must.New(NewSegmented(db, WithTable(table))) }},
		{"batched", false, func(table string) stockguard.Inventory { return must.New(NewBatched(db, WithTable(table))) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			table := newTable(t, db)
			if c.segmented {
				table = newSegTable(t, db)
			}
			stocktest.Run(t, func(*testing.T) stockguard.Inventory { return c.new(table) })
		})
	}
	t.Run("namedlock-refused", func(t *testing.T) {
		// Detected, not told: NewNamedLock refuses TiDB at first use.
		table := newTable(t, db)
		n, err := NewNamedLock(db, WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Decrement(t.Context(), "sku", 1); !errors.Is(err, stockguard.ErrUnavailable) || !strings.Contains(err.Error(), "TiDB") {
			t.Errorf("NewNamedLock on TiDB: %v, want ErrUnavailable naming TiDB", err)
		}
	})
	for _, name := range orderStrategyNames {
		t.Run("orders/"+name, func(t *testing.T) {
			table := newTable(t, db)
			suite := stocktest.Suite{Footprint: footprint(db, table)}
			suite.RunOrders(t, func(*testing.T) stockguard.Orders { return orderStrategies(db, WithTable(table))[name] })
		})
	}
}

// TestEngine_detected: a strategy finds out on first use which engine it
// talks to.
func TestEngine_detected(t *testing.T) {
	for _, c := range []struct {
		name string
		db   func(testing.TB) *sqlx.DB
		want Engine
	}{
		{"tidb", tidbDB, EngineTiDB},
		{"mysql", func(t testing.TB) *sqlx.DB { return testDB(t) }, EngineMySQL},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := c.db(t)
			a, err := NewAtomic(db, WithTable(newTable(t, db)))
			if err != nil {
				t.Fatal(err)
			}
			if got := a.engine.known(); got != EngineDetect {
				t.Fatalf("before first use: %v", got)
			}
			if _, err := a.Stock(t.Context(), "nothing"); !errors.Is(err, stockguard.ErrUnknownSKU) {
				t.Fatalf("Stock: %v", err)
			}
			if got := a.engine.known(); got != c.want {
				t.Errorf("engine %v, want %v", got, c.want)
			}
		})
	}
}

// TestTiDB_hotRow: 32 buyers on one row, each request tried once, on the
// engine-aware path and on TiDB's optimistic autocommit, where UPDATEs
// conflict at commit (TiDB retries an autocommit statement itself, a few
// times): a failure must be ErrContention (nothing taken), never anything
// else, and what was acknowledged must be what is gone.
func TestTiDB_hotRow(t *testing.T) {
	db := tidbDB(t)
	once := WithRetry(strategy.RetryPolicy{MaxAttempts: 1})
	for _, c := range []struct {
		name   string
		engine Engine
	}{
		{"detected", EngineDetect},
		{"autocommit", EngineMySQL},
	} {
		t.Run(c.name, func(t *testing.T) {
			table := newTable(t, db)
			mustSet(t, db, table, "hot", 1_000_000)
			a, err := NewAtomic(db, WithTable(table), WithEngine(c.engine), once)
			if err != nil {
				t.Fatal(err)
			}
			const workers, each = 32, 40
			var mu sync.Mutex
			var acked, contended int64
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range each {
						err := a.Decrement(t.Context(), "hot", 1)
						mu.Lock()
						switch {
						case err == nil:
							acked++
						case errors.Is(err, stockguard.ErrContention):
							contended++
						default:
							t.Errorf("Decrement: %v", err)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			qty, _ := level(t, db, table, "hot")
			if acked+qty != 1_000_000 {
				t.Errorf("%d acknowledged, %d left of 1000000", acked, qty)
			}
			t.Logf("%d acknowledged, %d refused as contention", acked, contended)
		})
	}
}

// TestTiDB_skipLockedUnavailable: TiDB returns a locked row to FOR UPDATE
// SKIP LOCKED without locking it, so NewPessimistic refuses that mode on
// TiDB at first use, having changed nothing.
func TestTiDB_skipLockedUnavailable(t *testing.T) {
	db := tidbDB(t)
	table := newTable(t, db)
	mustSet(t, db, table, "sku", 10)
	p, err := NewPessimistic(db, WithTable(table), WithLockMode(LockSkipLocked))
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error { return p.Decrement(t.Context(), "sku", 1) },
		func() error { _, err := p.Stock(t.Context(), "sku"); return err },
		func() error { return p.SetStock(t.Context(), "sku", 5) },
	} {
		err := call()
		contractOne(t, err, stockguard.ErrUnavailable)
		if !strings.Contains(err.Error(), "SKIP LOCKED") {
			t.Errorf("error does not say why: %v", err)
		}
	}
	if qty, _ := level(t, db, table, "sku"); qty != 10 {
		t.Errorf("qty %d, want 10 untouched", qty)
	}
}
