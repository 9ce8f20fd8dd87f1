package mysqllock

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
)

// A batch's statements fit the server's max_allowed_packet: carts of 64
// lines of 64-byte SKUs, many to a batch, would outgrow a small limit in
// one interpolated statement, fail the same way on every attempt, and
// never shrink. Each order fits on its own; the batch is written in parts
// that each fit.
func TestBatched_batchFitsMaxAllowedPacket(t *testing.T) {
	root := smallPackets(t)
	for _, pool := range []struct {
		name string
		edit func(*mysql.Config)
	}{{"statements", interpolate}, {"multiStatements", multi}} {
		t.Run(pool.name, func(t *testing.T) {
			db := testDB(t, pool.edit)
			table := newTable(t, root)
			b, err := NewBatched(db, WithTable(table), WithBatchSize(64))
			if err != nil {
				t.Fatal(err)
			}
			var lines []stockguard.Line
			for i := range stockguard.MaxLines {
				sku := fmt.Sprintf("%s%08d", strings.Repeat("s", 56), i)
				mustSet(t, root, table, sku, 1000)
				lines = append(lines, line(sku, 1))
			}
			mustSet(t, root, table, "gate", 10)
			release := queueBehind(t, b, table, "gate")
			const carts = 32
			calls := make([]func() error, carts)
			for i := range calls {
				calls[i] = func() error { return b.Take(t.Context(), fmt.Sprintf("cart-%d", i), lines...) }
			}
			results := queueCalls(t, b, calls...)
			release()
			for i, r := range results {
				want(t, fmt.Sprintf("cart %d", i), <-r, nil)
			}
			for _, ln := range lines {
				if n, _ := level(t, root, table, ln.SKU); n != 1000-carts {
					t.Fatalf("%s: %d left, want %d", ln.SKU, n, 1000-carts)
				}
			}
		})
	}
}

// smallPackets sets the shared server's max_allowed_packet to 64 KiB for
// the sessions opened until t ends, and returns a pool on it.
func smallPackets(t *testing.T) *sqlx.DB {
	root := testDB(t)
	var old int64
	if err := root.Get(&old, "SELECT @@global.max_allowed_packet"); err != nil {
		t.Fatal(err)
	}
	// New sessions only: the pools the caller opens next.
	if _, err := root.Exec("SET GLOBAL max_allowed_packet = 65536"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		root.ExecContext(context.WithoutCancel(t.Context()), fmt.Sprintf("SET GLOBAL max_allowed_packet = %d", old))
	})
	return root
}

// A hold's lines INSERT writes its ID once per line: a batch of holds of
// 64 short lines under IDs of 128 quotes (escaped, each twice its size)
// fits the server's 64 KiB max_allowed_packet only if each hold counts its
// ID on every line. Each hold fits on its own.
func TestBatched_holdsFitMaxAllowedPacket(t *testing.T) {
	root := smallPackets(t)
	for _, pool := range []struct {
		name string
		edit func(*mysql.Config)
	}{{"statements", interpolate}, {"multiStatements", multi}} {
		t.Run(pool.name, func(t *testing.T) {
			db := testDB(t, pool.edit)
			table := newTable(t, root)
			b := must.New(NewBatched(db, WithTable(table), WithBatchSize(64)))
			var lines []stockguard.Line
			for i := range stockguard.MaxLines {
				sku := fmt.Sprintf("s%02d", i)
				mustSet(t, root, table, sku, 1000)
				lines = append(lines, line(sku, 1))
			}
			mustSet(t, root, table, "gate", 10)
			release := queueBehind(t, b, table, "gate")
			const carts = 8
			calls := make([]func() error, carts)
			for i := range calls {
				id := fmt.Sprintf("%d", i) + strings.Repeat("'", stockguard.MaxIDLen-1)
				calls[i] = func() error { return b.Hold(t.Context(), id, time.Hour, lines...) }
			}
			results := queueCalls(t, b, calls...)
			release()
			for i, r := range results {
				want(t, fmt.Sprintf("cart %d", i), <-r, nil)
			}
			for _, ln := range lines {
				if n, _ := level(t, root, table, ln.SKU); n != 1000-carts {
					t.Fatalf("%s: %d left, want %d", ln.SKU, n, 1000-carts)
				}
			}
		})
	}
}

// The driver's own limit, maxAllowedPacket on the DSN, may be below the
// server's: a batch's multi-statement must fit it too. Carts of 64 lines
// of 64-byte SKUs, many to a batch, on a multiStatements pool whose DSN
// says 64 KiB and a server that takes far more.
func TestBatched_batchFitsTheDriversMaxAllowedPacket(t *testing.T) {
	root := testDB(t)
	db := testDB(t, multi, func(c *mysql.Config) { c.MaxAllowedPacket = 65536 })
	table := newTable(t, root)
	b := must.New(NewBatched(db, WithTable(table), WithBatchSize(64)))
	var lines []stockguard.Line
	for i := range stockguard.MaxLines {
		sku := fmt.Sprintf("%s%08d", strings.Repeat("s", 56), i)
		mustSet(t, root, table, sku, 1000)
		lines = append(lines, line(sku, 1))
	}
	mustSet(t, root, table, "gate", 10)
	release := queueBehind(t, b, table, "gate")
	const carts = 32
	calls := make([]func() error, carts)
	for i := range calls {
		calls[i] = func() error { return b.Take(t.Context(), fmt.Sprintf("cart-%d", i), lines...) }
	}
	results := queueCalls(t, b, calls...)
	release()
	for i, r := range results {
		want(t, fmt.Sprintf("cart %d", i), <-r, nil)
	}
	for _, ln := range lines {
		if n, _ := level(t, root, table, ln.SKU); n != 1000-carts {
			t.Fatalf("%s: %d left, want %d", ln.SKU, n, 1000-carts)
		}
	}
}
