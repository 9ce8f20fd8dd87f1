package tiered

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/mysqllock"
)

func TestMain(m *testing.M) { backendstest.Main(m) }

func multi(c *mysql.Config) { c.InterpolateParams, c.MultiStatements = true, true }

// newTable creates a mysqllock schema of its own for t, dropped when t ends.
func newTable(t testing.TB, db *sqlx.DB) string {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := "tiered_" + hex.EncodeToString(b[:])
	if err := mysqllock.CreateSchema(t.Context(), db, mysqllock.WithTable(name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range mysqllock.Tables(name) {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+n+"`"); err != nil {
				t.Errorf("drop %s: %v", n, err)
			}
		}
	})
	return name
}

// rig is a tiered Orders over the shared Redis and MySQL, in a key prefix
// and tables of its own.
type rig struct {
	rdb    *redis.Client
	db     *sqlx.DB
	prefix string
	table  string
	back   stockguard.Orders
	o      *Orders
	q      *Streams
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{rdb: backendstest.RedisClient(t), db: backendstest.DB(t, multi)}
	r.prefix = redistest.Prefix(t, r.rdb)
	r.table = newTable(t, r.db)
	r.back = must.New(mysqllock.NewBatched(r.db, mysqllock.WithTable(r.table)))
	r.o = must.New(New(r.rdb, r.back, WithPrefix(r.prefix)))
	r.q = NewStreams(r.rdb, StreamKey(r.prefix), DefaultGroup)
	if err := r.o.Setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
}

// consumer returns a Consumer of r applying to back (r.back when nil).
func (r *rig) consumer(back stockguard.Orders, opts ...Option) *Consumer {
	if back == nil {
		back = r.back
	}
	return must.New(NewConsumer(r.rdb, back, append([]Option{WithPrefix(r.prefix)}, opts...)...))
}

// run runs c until t ends.
func run(t *testing.T, c *Consumer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// drain waits until the stream is empty.
func (r *rig) drain(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := Drain(ctx, r.q); err != nil {
		t.Fatal(err)
	}
}

// settled checks that the tiers agree on every sku once the stream is
// drained.
func (r *rig) settled(t *testing.T, skus ...string) {
	t.Helper()
	r.drain(t)
	rep, err := NewReconciler(r.o, r.q).Check(t.Context(), skus...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Drifts {
		t.Errorf("drift after draining: %+v", d)
	}
}

func stock(t *testing.T, inv stockguard.Inventory, qty int64, skus ...string) {
	t.Helper()
	for _, sku := range skus {
		if err := inv.SetStock(t.Context(), sku, qty); err != nil {
			t.Fatal(err)
		}
	}
}

func wantStock(t *testing.T, name string, inv stockguard.Inventory, sku string, want int64) {
	t.Helper()
	if got, err := inv.Stock(t.Context(), sku); err != nil || got != want {
		t.Errorf("%s: Stock(%q) = %d, %v; want %d", name, sku, got, err, want)
	}
}

func line(sku string, qty int64) stockguard.Line { return stockguard.Line{SKU: sku, Qty: qty} }
