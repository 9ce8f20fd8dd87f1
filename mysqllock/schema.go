package mysqllock

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// CreateSchema creates every table the package uses, unless it exists
// (options read: WithTable), so that one call sets a database up for every
// strategy: the stock table, NewSegmented's segments table (see
// CreateSegmentedSchema), and the two tables of the order ledger that
// NewAtomic's and NewBatched's Orders methods keep (OrdersTable,
// OrderLinesTable). Tables lists their names. It is idempotent and leaves
// an existing table as it is.
//
// The stock table (docs/design.md, section 3, "Validation") keys on sku
// VARBINARY(64), not VARCHAR(64), on purpose. Every text collation of MariaDB, and
// MySQL's utf8mb4_bin, is PAD SPACE ('a' = 'a ') and most also fold case or
// accents ('sku' = 'SKU', 'e' = 'é'), so distinct valid SKUs would share a
// row. Binary comparison makes every distinct byte string its own SKU, on
// MySQL 8.x and MariaDB alike, and 64 bytes is exactly stockguard.MaxSKULen.
// A CHECK constraint keeps qty within 0…stockguard.MaxQty as a last line of
// defence (enforced by MySQL ≥ 8.0.16 and MariaDB ≥ 10.2).
//
//	sku     VARBINARY(64) PRIMARY KEY
//	qty     BIGINT NOT NULL                  units left
//	version BIGINT NOT NULL DEFAULT 0        bumped by every write (NewOptimistic's CAS)
//	fence   BIGINT NOT NULL DEFAULT 0        highest lock token that wrote the row (FencedStore)
//	on_orders BIGINT NOT NULL DEFAULT 0      units out on open orders (held or taken), moved
//	                                         with qty by every Orders call; Restock's and
//	                                         SetStock's room check reads it
//
// A stock table made before on_orders existed gets it here: CreateSchema
// adds the column and fills it from the ledger in one statement. Run it
// while no Orders call writes (stop the writers, run CreateSchema, start
// the new version): an order placed or closed by an older version
// meanwhile would not be counted.
//
// The ledger records one row per order ID (Take, Hold or Restock) and one
// per line, with IDs and SKUs binary for the same reasons; times are UTC by
// the server's clock:
//
//	<table>_orders: one row per ID
//	id         VARBINARY(128) PRIMARY KEY
//	kind       TINYINT NOT NULL       1 Take, 2 Hold, 3 Restock
//	state      TINYINT NOT NULL       a stockguard.OrderState (a restock: OrderTaken)
//	deadline   DATETIME(6) NULL       holds: when the hold expires unless confirmed
//	created_at DATETIME(6) NOT NULL
//	changed_at DATETIME(6) NOT NULL   last change of state; retention counts from it
//
//	<table>_order_lines: one row per line
//	order_id   VARBINARY(128), sku VARBINARY(64), PRIMARY KEY (order_id, sku)
//	qty        BIGINT NOT NULL
//	expires    DATETIME(6) NULL       the order's deadline while it is held, else NULL
//	KEY held (sku, expires)           finds a SKU's expired holds without a sweeper
//
// It returns an error wrapping stockguard.ErrInvalidRequest for an invalid
// option, else the driver's error.
func CreateSchema(ctx context.Context, db sqlx.ExecerContext, opts ...Option) error {
	o := newOptions(opts)
	if o.err != nil {
		return o.err
	}
	if err := createTable(ctx, db, o.table, `
	sku VARBINARY(64) NOT NULL PRIMARY KEY,
	qty BIGINT NOT NULL,
	version BIGINT NOT NULL DEFAULT 0,
	fence BIGINT NOT NULL DEFAULT 0,
	on_orders BIGINT NOT NULL DEFAULT 0,
	CHECK (qty BETWEEN 0 AND 9007199254740991)
`); err != nil {
		return err
	}
	added, err := addOnOrders(ctx, db, o.table)
	if err != nil {
		return err
	}
	if err := CreateSegmentedSchema(ctx, db, WithTable(o.table)); err != nil {
		return err
	}
	// No CHECK constraints here: MySQL names them <table>_chk_<n>, which
	// would not fit in 64 bytes beside a 48-byte stock table name, and every
	// value is validated before it is written.
	if err := createTable(ctx, db, OrdersTable(o.table), `
	id VARBINARY(128) NOT NULL PRIMARY KEY,
	kind TINYINT NOT NULL,
	state TINYINT NOT NULL,
	deadline DATETIME(6) NULL,
	created_at DATETIME(6) NOT NULL,
	changed_at DATETIME(6) NOT NULL
`); err != nil {
		return err
	}
	if err := createTable(ctx, db, OrderLinesTable(o.table), `
	order_id VARBINARY(128) NOT NULL,
	sku VARBINARY(64) NOT NULL,
	qty BIGINT NOT NULL,
	expires DATETIME(6) NULL,
	PRIMARY KEY (order_id, sku),
	KEY held (sku, expires)
`); err != nil {
		return err
	}
	if !added {
		return nil
	}
	// The units out on open orders that the ledger holds already.
	s, l, ord := quote(o.table), quote(OrderLinesTable(o.table)), quote(OrdersTable(o.table))
	_, err = db.ExecContext(ctx, fmt.Sprintf("UPDATE %s s SET on_orders = (SELECT COALESCE(SUM(l.qty), 0) FROM %s l JOIN %s o ON o.id = l.order_id WHERE l.sku = s.sku AND o.kind <> %d AND o.state IN (%d, %d))",
		s, l, ord, kindRestock, stockguard.OrderHeld, stockguard.OrderTaken))
	if err != nil {
		return fmt.Errorf("mysqllock: fill %s.on_orders: %w", o.table, err)
	}
	return nil
}

// addOnOrders adds the on_orders column to a stock table made before it
// existed, and reports whether it did.
func addOnOrders(ctx context.Context, db sqlx.ExecerContext, table string) (bool, error) {
	_, err := db.ExecContext(ctx, "SELECT on_orders FROM "+quote(table)+" LIMIT 0")
	switch {
	case err == nil:
		return false, nil
	case !isServerError(err, erBadField):
		return false, fmt.Errorf("mysqllock: read table %s: %w", table, err)
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+quote(table)+" ADD COLUMN on_orders BIGINT NOT NULL DEFAULT 0"); err != nil {
		return false, fmt.Errorf("mysqllock: add %s.on_orders: %w", table, err)
	}
	return true, nil
}

// OrdersTable returns the name of the ledger's orders table for the stock
// table table: table + "_orders".
func OrdersTable(table string) string { return table + "_orders" }

// OrderLinesTable returns the name of the ledger's lines table for the
// stock table table: table + "_order_lines".
func OrderLinesTable(table string) string { return table + "_order_lines" }

// Tables returns the names of every table CreateSchema creates for the
// stock table table: what to drop to remove them all.
func Tables(table string) []string {
	return []string{table, SegmentsTable(table), OrdersTable(table), OrderLinesTable(table)}
}

// createTable creates InnoDB table name with columns unless it exists.
func createTable(ctx context.Context, db sqlx.ExecerContext, name, columns string) error {
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+quote(name)+" ("+columns+") ENGINE=InnoDB"); err != nil {
		return fmt.Errorf("mysqllock: create table %s: %w", name, err)
	}
	return nil
}

// quote quotes an identifier that passed the identifier check.
func quote(name string) string { return "`" + name + "`" }

// queries are the statements of one table, built once per instance.
type queries struct {
	setStock  string // sku, qty, qty
	stock     string // sku → qty
	take      string // qty, sku, qty: the conditional decrement
	lockRow   string // sku → qty; FOR UPDATE plus the lock mode's suffix
	takeHeld  string // qty, sku: decrement of a row this transaction has locked
	read      string // sku → qty, version
	cas       string // qty, sku, version
	fenced    string // qty, token, sku, token
	readFence string // sku → fence
}

func newQueries(table string, mode LockMode) queries {
	t := quote(table)
	lock := " FOR UPDATE"
	switch mode {
	case LockNoWait:
		lock += " NOWAIT"
	case LockSkipLocked:
		lock += " SKIP LOCKED"
	}
	return queries{
		// version moves on every write, so a CAS of NewOptimistic never
		// mistakes a row rewritten by another strategy, or re-stocked, for
		// the one it read (no ABA), and the fence is never touched here: a
		// stale lock holder must stay fenced off after a re-stock.
		setStock:  "INSERT INTO " + t + " (sku, qty) VALUES (?, ?) ON DUPLICATE KEY UPDATE qty = ?, version = version + 1",
		stock:     "SELECT qty FROM " + t + " WHERE sku = ?",
		take:      "UPDATE " + t + " SET qty = qty - ?, version = version + 1 WHERE sku = ? AND qty >= ?",
		lockRow:   "SELECT qty FROM " + t + " WHERE sku = ?" + lock,
		takeHeld:  "UPDATE " + t + " SET qty = qty - ?, version = version + 1 WHERE sku = ?",
		read:      "SELECT qty, version FROM " + t + " WHERE sku = ?",
		cas:       "UPDATE " + t + " SET qty = ?, version = version + 1 WHERE sku = ? AND version = ?",
		fenced:    "UPDATE " + t + " SET qty = ?, fence = ?, version = version + 1 WHERE sku = ? AND fence < ?",
		readFence: "SELECT fence FROM " + t + " WHERE sku = ?",
	}
}
