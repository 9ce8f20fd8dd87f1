package pglock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/ordersload"
	"github.com/stockguard/stockguard/strategy"
)

func line(sku string, qty int64) stockguard.Line { return stockguard.Line{SKU: sku, Qty: qty} }

// want fails t unless err satisfies exactly one contract error, and that
// one is target (nil: err is nil).
func want(t testing.TB, what string, err, target error) {
	t.Helper()
	if target == nil {
		if err != nil {
			t.Fatalf("%s: %v, want nil", what, err)
		}
		return
	}
	var hits []error
	for _, e := range strategy.ContractErrors() {
		if errors.Is(err, e) {
			hits = append(hits, e)
		}
	}
	if len(hits) != 1 || hits[0] != target {
		t.Fatalf("%s: %v (matches %v), want exactly %v", what, err, hits, target)
	}
}

func stockOf(t testing.TB, o stockguard.Orders, sku string) int64 {
	t.Helper()
	n, err := o.Stock(t.Context(), sku)
	if err != nil {
		t.Fatalf("Stock(%q): %v", sku, err)
	}
	return n
}

// wantLevels fails t unless o's stock of each SKU of levels is its level.
func wantLevels(t testing.TB, o stockguard.Orders, levels map[string]int64) {
	t.Helper()
	for sku, left := range levels {
		if got := stockOf(t, o, sku); got != left {
			t.Errorf("%s: %d left, want %d", sku, got, left)
		}
	}
}

// 64 goroutines over two instances place multi-line orders over 8 SKUs —
// takes, holds left to expire, confirms, returns, restocks — retrying IDs
// concurrently (a call may run out of retries: ErrContention, nothing
// changed); afterwards every SKU's units add up, every acknowledged
// order is in a state it may be in, and each SKU's on_orders matches the
// ledger.
func TestOrders_concurrentConservation(t *testing.T) {
	db := testDB(t)
	for _, name := range orderStrategyNames {
		t.Run(name, func(t *testing.T) {
			table := newTable(t, db)
			insts := []stockguard.Orders{orderStrategies(db, WithTable(table))[name], orderStrategies(db, WithTable(table))[name]}
			ordersload.Conservation(t, insts, 64, 1500)
			onOrdersMatchLedger(t, db, table)
		})
	}
}

// onOrdersMatchLedger fails t unless every stock row's on_orders is the
// units of its SKU's open orders in the ledger.
func onOrdersMatchLedger(t *testing.T, db *sqlx.DB, table string) {
	t.Helper()
	ordersload.OnOrdersMatchLedger(t, db, fmt.Sprintf("SELECT s.sku, s.on_orders, (SELECT COALESCE(SUM(l.qty), 0)::bigint FROM %s l JOIN %s o ON o.id = l.order_id WHERE l.sku = s.sku AND o.kind <> %d AND o.state IN (%d, %d)) AS ledger FROM %s s",
		quote(OrderLinesTable(table)), quote(OrdersTable(table)), kindRestock, stockguard.OrderHeld, stockguard.OrderTaken, quote(table)))
}
