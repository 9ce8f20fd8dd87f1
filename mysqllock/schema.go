package mysqllock

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// CreateSchema creates every table the package uses, unless it exists
// (options read: WithTable), so that one call sets a database up for every
// strategy: the stock table, NewSegmented's segments table
// (SegmentsTable), and the two tables of the order ledger that
// NewAtomic's and NewBatched's Orders methods keep (OrdersTable,
// OrderLinesTable). Tables lists their names. It is idempotent and leaves
// an existing table as it is.
//
// The stock table keys on sku
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
// The ledger records one row per order ID (Take, Hold or Restock), with
// IDs and SKUs binary for the same reasons; times are UTC by the server's
// clock. A Take's or a Restock's lines are a column of its row; a Hold's
// are rows of the lines table, one per line, where the held index finds a
// SKU's expired holds:
//
//	<table>_orders: one row per ID
//	id         VARBINARY(128) PRIMARY KEY
//	kind       TINYINT NOT NULL       1 Take, 2 Hold, 3 Restock
//	state      TINYINT NOT NULL       a stockguard.OrderState (a restock: OrderTaken)
//	deadline   DATETIME(6) NULL       holds: when the hold expires unless confirmed
//	created_at DATETIME(6) NOT NULL
//	changed_at DATETIME(6) NOT NULL   last change of state; retention counts from it
//	line_list  VARBINARY(9344) NULL   a Take's or Restock's lines, in SKU order:
//	                                  hex(sku):qty, comma-separated ("61:3,62:1");
//	                                  NULL for a hold, whose lines are rows
//
//	<table>_order_lines: one row per line of a hold
//	order_id   VARBINARY(128), sku VARBINARY(64), PRIMARY KEY (order_id, sku)
//	qty        BIGINT NOT NULL
//	expires    DATETIME(6) NULL       the order's deadline while it is held, else NULL
//	KEY held (sku, expires)           finds a SKU's expired holds without a sweeper
//
//	<table>_fences: one row per fence name (see Atomic.Fenced)
//	name       VARBINARY(128) PRIMARY KEY
//	epoch      BIGINT NOT NULL        only grows (AdvanceFence)
//
// A ledger made before line_list existed gets the column here; its orders
// keep their line rows, which every reader still reads, so no row moves.
// Run it while no Orders call writes (stop the writers, run CreateSchema,
// start the new version): until then the new version's Orders calls fail
// with stockguard.ErrUnavailable (an unknown column), and an older version
// would not see the lines of an order recorded in the new layout.
//
// It returns an error wrapping stockguard.ErrInvalidRequest for an invalid
// option, else the driver's error.
func CreateSchema(ctx context.Context, db sqlx.ExecerContext, opts ...Option) error {
	pool, _ := db.(*sqlx.DB) // a transaction or connection: its pool is the caller's
	o, err := build("CreateSchema", pool, readsSchema, opts)
	if err != nil {
		return err
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
	added, err := addColumn(ctx, db, o.table, "on_orders", "BIGINT NOT NULL DEFAULT 0")
	if err != nil {
		return err
	}
	if err := createSegments(ctx, db, o.table); err != nil {
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
	changed_at DATETIME(6) NOT NULL,
	line_list VARBINARY(`+strconv.Itoa(lineListLen)+`) NULL
`); err != nil {
		return err
	}
	if _, err := addColumn(ctx, db, OrdersTable(o.table), "line_list", "VARBINARY("+strconv.Itoa(lineListLen)+") NULL"); err != nil {
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
	if err := createTable(ctx, db, FencesTable(o.table), `
	name VARBINARY(128) NOT NULL PRIMARY KEY,
	epoch BIGINT NOT NULL
`); err != nil {
		return err
	}
	if !added {
		return nil
	}
	// The units out on open orders that the ledger holds already.
	_, err = db.ExecContext(ctx, "UPDATE "+quote(o.table)+" s JOIN ("+openUnitsSQL(o.table)+") u ON u.sku = s.sku SET s.on_orders = u.units")
	if err != nil {
		return fmt.Errorf("mysqllock: fill %s.on_orders: %w", o.table, err)
	}
	return nil
}

// lineListLen is the longest line_list: stockguard.MaxLines lines of the
// longest SKU (two hex digits a byte) and the most units.
const lineListLen = stockguard.MaxLines * (2*stockguard.MaxSKULen + len(":9007199254740991,"))

// addColumn adds column, of definition, to table made before it existed,
// and reports whether it did. Run by several processes at once, one adds
// it, and the others find it there.
func addColumn(ctx context.Context, db sqlx.ExecerContext, table, column, definition string) (bool, error) {
	_, err := db.ExecContext(ctx, "SELECT "+column+" FROM "+quote(table)+" LIMIT 0")
	switch {
	case err == nil:
		return false, nil
	case !isServerError(err, erBadField):
		return false, fmt.Errorf("mysqllock: read table %s: %w", table, err)
	}
	_, err = db.ExecContext(ctx, "ALTER TABLE "+quote(table)+" ADD COLUMN "+column+" "+definition)
	switch {
	case isServerError(err, erDupFieldName):
		return false, nil // added meanwhile by another CreateSchema
	case err != nil:
		return false, fmt.Errorf("mysqllock: add %s.%s: %w", table, column, err)
	}
	return true, nil
}

// openUnitsSQL is a query of the units out on the open orders (held or
// taken) of table's ledger, per SKU: columns sku and units. It reads both
// layouts of an order's lines (see CreateSchema), splitting line_list on
// the server.
func openUnitsSQL(table string) string {
	return unitsSQL(table, fmt.Sprintf("o.kind <> %d AND o.state IN (%d, %d)", kindRestock, stockguard.OrderHeld, stockguard.OrderTaken))
}

// unitsSQL is openUnitsSQL of the orders o for which the condition open
// holds; open appears twice, so its arguments are given twice.
func unitsSQL(table, open string) string {
	o, l := quote(OrdersTable(table)), quote(OrderLinesTable(table))
	var n strings.Builder
	n.WriteString("SELECT 1 AS i")
	for i := 2; i <= stockguard.MaxLines; i++ {
		fmt.Fprintf(&n, " UNION ALL SELECT %d", i)
	}
	// The n-th line of line_list, n = 1…stockguard.MaxLines: the text
	// after the (n-1)-th comma and before the n-th.
	upTo := "SUBSTRING_INDEX(o.line_list, ',', n.i)"
	return "SELECT sku, SUM(qty) AS units FROM (" +
		"SELECT l.sku, l.qty FROM " + l + " l JOIN " + o + " o ON o.id = l.order_id WHERE " + open +
		" UNION ALL SELECT UNHEX(SUBSTRING_INDEX(SUBSTRING_INDEX(" + upTo + ", ',', -1), ':', 1)), CAST(SUBSTRING_INDEX(" + upTo + ", ':', -1) AS SIGNED) FROM " +
		o + " o JOIN (" + n.String() + ") n" +
		" ON n.i <= 1 + LENGTH(o.line_list) - LENGTH(REPLACE(o.line_list, ',', '')) WHERE o.line_list IS NOT NULL AND " + open +
		") x GROUP BY sku"
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
	return []string{table, SegmentsTable(table), OrdersTable(table), OrderLinesTable(table), FencesTable(table)}
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
