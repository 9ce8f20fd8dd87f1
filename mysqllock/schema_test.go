package mysqllock

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// SKUs that text collations would merge — PAD SPACE, case and accent
// folding, Unicode normalisation — are distinct rows.
func TestCreateSchema_distinctSKUs(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	// Idempotent: a second call leaves the table as it is.
	if err := CreateSchema(t.Context(), db, WithTable(table)); err != nil {
		t.Fatal(err)
	}
	skus := []string{"a", "a ", "a  ", " a", "A", "é", "e\u0301", "e", "E", "ß", "ss", "i", "ı", "🙂", "😀",
		strings.Repeat("x", stockguard.MaxSKULen), strings.Repeat("é", stockguard.MaxSKULen/2)}
	inv, err := NewAtomic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	for i, sku := range skus {
		if err := inv.SetStock(t.Context(), sku, int64(i)); err != nil {
			t.Fatalf("SetStock(%q): %v", sku, err)
		}
	}
	for i, sku := range skus {
		if got, err := inv.Stock(t.Context(), sku); err != nil || got != int64(i) {
			t.Errorf("Stock(%q) = %d, %v; want %d", sku, got, err, i)
		}
	}
	var rows int
	if err := db.Get(&rows, "SELECT COUNT(*) FROM "+quote(table)); err != nil || rows != len(skus) {
		t.Errorf("%d rows, %v; want %d", rows, err, len(skus))
	}
}

// The CHECK constraint refuses a level no strategy should ever write.
func TestCreateSchema_checkConstraint(t *testing.T) {
	db := testDB(t)
	table := newTable(t, db)
	mustSet(t, db, table, "x", 1)
	for _, q := range []int64{-1, stockguard.MaxQty + 1} {
		if _, err := db.Exec("UPDATE "+quote(table)+" SET qty = ? WHERE sku = 'x'", q); err == nil {
			t.Errorf("qty %d accepted", q)
		}
	}
}

// constructorErrs returns what every constructor of the package answers to
// opts, with no database: an invalid option is refused before any I/O.
func constructorErrs(opts ...Option) map[string]error {
	errOf := func(_ any, err error) error { return err }
	return map[string]error{
		"NewAtomic":      errOf(NewAtomic(nil, opts...)),
		"NewBatched":     errOf(NewBatched(nil, opts...)),
		"NewPessimistic": errOf(NewPessimistic(nil, opts...)),
		"NewOptimistic":  errOf(NewOptimistic(nil, opts...)),
		"NewNamedLock":   errOf(NewNamedLock(nil, opts...)),
		"NewSegmented":   errOf(NewSegmented(nil, opts...)),
		"NewFencedStore": errOf(NewFencedStore(nil, opts...)),
	}
}

func TestWithTable_invalid(t *testing.T) {
	for _, name := range []string{"", "1stock", "stock;DROP TABLE x", "st`ock", "sto ck", "schema.stock", "stöck",
		strings.Repeat("s", 49)} {
		t.Run(name, func(t *testing.T) {
			// Rejected before any I/O: no database needed.
			if err := CreateSchema(t.Context(), nil, WithTable(name)); !errors.Is(err, stockguard.ErrInvalidRequest) {
				t.Errorf("CreateSchema: %v, want ErrInvalidRequest", err)
			}
			for ctor, err := range constructorErrs(WithTable(name)) {
				if !errors.Is(err, stockguard.ErrInvalidRequest) {
					t.Errorf("%s: %v, want ErrInvalidRequest", ctor, err)
				}
			}
		})
	}
}

func TestOptions_invalid(t *testing.T) {
	for name, opt := range map[string]Option{
		"mode":           WithLockMode(LockMode(7)),
		"lockWait0":      WithLockWaitTimeout(0),
		"lockWaitHuge":   WithLockWaitTimeout(200_000_000 * time.Second),
		"namedNegative":  WithNamedLockTimeout(-time.Second),
		"namedHuge":      WithNamedLockTimeout(200_000_000 * time.Second),
		"tableThenValid": func(o *options) { WithTable("bad name")(o); WithTable("good")(o) },
		"retryNegative":  WithRetry(strategy.RetryPolicy{MaxAttempts: -1}),
	} {
		t.Run(name, func(t *testing.T) {
			if err := CreateSchema(t.Context(), nil, opt); !errors.Is(err, stockguard.ErrInvalidRequest) {
				t.Errorf("CreateSchema: %v, want ErrInvalidRequest", err)
			}
			for ctor, err := range constructorErrs(opt) {
				if !errors.Is(err, stockguard.ErrInvalidRequest) {
					t.Errorf("%s: %v, want ErrInvalidRequest", ctor, err)
				}
			}
		})
	}
}

func TestLockMode_String(t *testing.T) {
	for m, want := range map[LockMode]string{LockWait: "wait", LockNoWait: "nowait", LockSkipLocked: "skiplocked", 9: "LockMode(9)"} {
		if got := m.String(); got != want {
			t.Errorf("%d: %q, want %q", int(m), got, want)
		}
	}
}

// CreateSchema over a stock table made before on_orders existed adds the
// column and fills it with the units of the ledger's open orders, so that
// Restock's room check counts them.
func TestCreateSchema_addsOnOrders(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	ctx := t.Context()
	a, err := NewAtomic(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetStock(ctx, "x", 10); err != nil {
		t.Fatal(err)
	}
	want(t, "Take", a.Take(ctx, "t", line("x", 3)), nil)
	want(t, "Hold", a.Hold(ctx, "h", stockguard.MaxHoldTTL, line("x", 2)), nil)
	want(t, "Take r", a.Take(ctx, "r", line("x", 1)), nil)
	want(t, "Return", a.Return(ctx, "r"), nil)
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+quote(table)+" DROP COLUMN on_orders"); err != nil {
		t.Fatal(err)
	}
	// Before the upgrade, orders are unavailable and change nothing.
	want(t, "Take before the upgrade", a.Take(ctx, "u", line("x", 1)), stockguard.ErrUnavailable)
	if got := stockOf(t, a, "x"); got != 5 {
		t.Fatalf("x: %d left, want 5", got)
	}
	if err := CreateSchema(ctx, db, WithTable(table)); err != nil {
		t.Fatal(err)
	}
	if err := CreateSchema(ctx, db, WithTable(table)); err != nil {
		t.Fatal("again:", err)
	}
	var out int64
	if err := db.GetContext(ctx, &out, "SELECT on_orders FROM "+quote(table)+" WHERE sku = 'x'"); err != nil {
		t.Fatal(err)
	}
	if out != 5 {
		t.Fatalf("on_orders = %d, want 5 (3 taken, 2 held)", out)
	}
	// 5 left, 5 out: room for MaxQty-10 more, not one unit beyond.
	want(t, "Restock past MaxQty", a.Restock(ctx, "big", "x", stockguard.MaxQty-9), stockguard.ErrInvalidRequest)
	want(t, "Restock to MaxQty", a.Restock(ctx, "fits", "x", stockguard.MaxQty-10), nil)
}
