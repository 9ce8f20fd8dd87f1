package mysqllock

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
)

// newSegTable creates a stock table name of t's own and its segments
// table, both dropped when t ends.
func newSegTable(t testing.TB, db *sqlx.DB) string {
	t.Helper()
	table := newTable(t, db)
	if err := CreateSchema(t.Context(), db, WithTable(table)); err != nil {
		t.Fatal(err)
	}
	dropAtCleanup(t, db, SegmentsTable(table))
	return table
}

// segments reads sku's segment levels in segment order.
func segments(t *testing.T, db *sqlx.DB, table, sku string) []int64 {
	t.Helper()
	var qtys []int64
	if err := db.SelectContext(t.Context(), &qtys, "SELECT qty FROM "+quote(SegmentsTable(table))+" WHERE sku = ? ORDER BY seg", sku); err != nil {
		t.Fatal(err)
	}
	return qtys
}

func TestSegmented_conformance(t *testing.T) {
	db := testDB(t, interpolate)
	for _, n := range []int{DefaultSegments, 1} {
		t.Run(fmt.Sprintf("segments=%d", n), func(t *testing.T) {
			table := newSegTable(t, db)
			stocktest.Run(t, func(*testing.T) stockguard.Inventory {
				return must.New(NewSegmented(db, WithTable(table), WithSegments(n)))
			})
		})
	}
}

func TestCreateSchema_segmentsIdempotent(t *testing.T) {
	db := testDB(t)
	table := newSegTable(t, db)
	// Idempotent.
	if err := CreateSchema(t.Context(), db, WithTable(table)); err != nil {
		t.Fatal(err)
	}
	if err := CreateSchema(t.Context(), db, WithTable("no-such name")); !errors.Is(err, stockguard.ErrInvalidRequest) {
		t.Fatalf("invalid table name: %v", err)
	}
}

func TestSegmented_SetStock_spreadsEvenly(t *testing.T) {
	db := testDB(t, interpolate)
	table := newSegTable(t, db)
	s, err := NewSegmented(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		segments int
		qty      int64
		want     []int64
	}{
		{8, 10, []int64{2, 2, 1, 1, 1, 1, 1, 1}},
		{8, 3, []int64{1, 1, 1, 0, 0, 0, 0, 0}},
		{8, 16, []int64{2, 2, 2, 2, 2, 2, 2, 2}},
		// Re-stocking with fewer segments drops the others.
		{3, 7, []int64{3, 2, 2}},
		{1, 0, []int64{0}},
		{2, stockguard.MaxQty, []int64{stockguard.MaxQty/2 + 1, stockguard.MaxQty / 2}},
	} {
		inv, err := NewSegmented(db, WithTable(table), WithSegments(c.segments))
		if err != nil {
			t.Fatal(err)
		}
		if err := inv.SetStock(t.Context(), "sku", c.qty); err != nil {
			t.Fatal(err)
		}
		if got := segments(t, db, table, "sku"); !slices.Equal(got, c.want) {
			t.Errorf("%d over %d segments: %v, want %v", c.qty, c.segments, got, c.want)
		}
		// Any instance reads the exact sum.
		if got, err := s.Stock(t.Context(), "sku"); err != nil || got != c.qty {
			t.Errorf("Stock = %d, %v; want %d", got, err, c.qty)
		}
	}
}

// A request that fits no single segment but fits their total succeeds;
// only a total too small refuses.
func TestSegmented_Decrement_noFalseSoldOut(t *testing.T) {
	db := testDB(t, interpolate)
	table := newSegTable(t, db)
	for _, c := range []struct {
		name  string
		stock int64
		takes []int64 // all succeed
		then  int64   // refused
	}{
		{"7,3", 10, []int64{7, 3}, 1},
		{"ones", 10, []int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1},
		{"all at once", 10, []int64{10}, 1},
		{"fewer units than segments", 3, []int64{3}, 1},
		{"too much", 10, []int64{6}, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSegmented(db, WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetStock(t.Context(), "sku", c.stock); err != nil {
				t.Fatal(err)
			}
			left := c.stock
			for _, qty := range c.takes {
				if err := s.Decrement(t.Context(), "sku", qty); err != nil {
					t.Fatalf("Decrement(%d) with %d left: %v", qty, left, err)
				}
				left -= qty
			}
			contractOne(t, s.Decrement(t.Context(), "sku", c.then), stockguard.ErrInsufficientStock)
			var sum int64
			for _, q := range segments(t, db, table, "sku") {
				if q < 0 {
					t.Fatalf("a segment went below zero: %d", q)
				}
				sum += q
			}
			if sum != left {
				t.Fatalf("%d left in the segments, want %d", sum, left)
			}
		})
	}
}

// An unknown SKU creates no segment.
func TestSegmented_Decrement_unknownSKU(t *testing.T) {
	db := testDB(t, interpolate)
	table := newSegTable(t, db)
	s, err := NewSegmented(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	contractOne(t, s.Decrement(t.Context(), "ghost", 1), stockguard.ErrUnknownSKU)
	if got := segments(t, db, table, "ghost"); len(got) != 0 {
		t.Fatalf("segments appeared: %v", got)
	}
}

// A request that needs a segment another transaction has written but not
// committed waits for it rather than refusing on the uncommitted value:
// here a transaction empties one of four segments, then rolls back.
func TestSegmented_Decrement_waitsForLockedSegments(t *testing.T) {
	db := testDB(t, interpolate)
	table := newSegTable(t, db)
	s, err := NewSegmented(db, WithTable(table), WithSegments(4))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetStock(t.Context(), "sku", 8); err != nil {
		t.Fatal(err)
	}
	// Segments 2, 2, 2, 2: 7 units need all four.
	tx, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("UPDATE "+quote(SegmentsTable(table))+" SET qty = 0 WHERE sku = ? AND seg = 0", "sku"); err != nil {
		t.Fatal(err)
	}
	done := combinetest.Go(t.Context(), s, "sku", 7)
	waitingOn(t, db, "") // its UPDATE of segment 0, or its SELECT … FOR UPDATE
	tx.Rollback()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Stock(t.Context(), "sku"); got != 1 {
		t.Fatalf("%d left, want 1", got)
	}
}

// Two instances with 64 goroutines take 1–5 units at a time until sold
// out: exact totals, no false refusal, and the units left at the end fit
// none of the refused requests.
func TestSegmented_Decrement_conservation(t *testing.T) {
	db := testDB(t, interpolate)
	table := newSegTable(t, db)
	combinetest.DrainMixed(t, []stockguard.Inventory{must.New(NewSegmented(db, WithTable(table))), must.New(NewSegmented(db, WithTable(table)))}, "hot", 3000)
}
