package pglock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// CreateSchema creates every table the package uses, unless it exists
// (options read: WithTable), so that one call sets a database up for every
// strategy: the stock table, NewSegmented's segments table
// (SegmentsTable), and the two tables of the order ledger that NewAtomic's
// and NewBatched's Orders methods keep (OrdersTable, OrderLinesTable).
// Tables lists their names. It is idempotent and leaves an existing table
// as it is, but for the upgrade below.
//
// Text columns use the "C" collation: comparison by bytes, so every
// distinct SKU or ID is its own row whatever the database's default
// collation, and primary-key order is byte order. A CHECK constraint keeps
// qty within 0…stockguard.MaxQty as a last line of defence.
//
//	sku     text COLLATE "C" PRIMARY KEY
//	qty     bigint NOT NULL                 units left
//	version bigint NOT NULL DEFAULT 0       bumped by every write (NewOptimistic's CAS)
//	fence   bigint NOT NULL DEFAULT 0       kept for parity with mysqllock's table
//	on_orders bigint NOT NULL DEFAULT 0     units out on open orders (held or taken), moved
//	                                        with qty by every Orders call; Restock's and
//	                                        SetStock's room check reads it
//
// A stock table made before on_orders existed gets it here: one statement
// adds the column and fills it from the ledger, in one transaction. Run it
// while no Orders call writes (stop the writers, run CreateSchema, start
// the new version): an order placed or closed by an older version
// afterwards would not be counted. Until then every call on that table
// that moves units onto or off an order (Take, Hold, Return, Restock, and
// Stock or Order reclaiming an expired hold) fails with ErrUnavailable.
//
//	<table>_segments: NewSegmented's rows, sku + seg PRIMARY KEY, qty
//
//	<table>_orders: one row per ID
//	id         text COLLATE "C" PRIMARY KEY
//	kind       smallint NOT NULL       1 Take, 2 Hold, 3 Restock
//	state      smallint NOT NULL       a stockguard.OrderState (a restock: OrderTaken)
//	deadline   timestamptz NULL        holds: when the hold expires unless confirmed
//	created_at, changed_at timestamptz NOT NULL
//
//	<table>_order_lines: one row per line, PRIMARY KEY (order_id, sku)
//	qty        bigint NOT NULL
//	expires    timestamptz NULL        the order's deadline while it is held, else NULL
//	index <table>_held (sku, expires) WHERE expires IS NOT NULL: a SKU's expired holds without a sweeper
//
//	<table>_fences: one row per fence name (see Atomic.Fenced)
//	name       text COLLATE "C" PRIMARY KEY
//	epoch      bigint NOT NULL         only grows (AdvanceFence)
//
// It returns an error wrapping stockguard.ErrInvalidRequest for an invalid
// option, else the driver's error.
func CreateSchema(ctx context.Context, db sqlx.ExecerContext, opts ...Option) error {
	pool, _ := db.(*sqlx.DB) // a transaction or connection: its pool is the caller's
	o, err := build("CreateSchema", pool, readsSchema, opts)
	if err != nil {
		return err
	}
	max := strconv.FormatInt(stockguard.MaxQty, 10)
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ` + quote(o.table) + ` (
	sku text COLLATE "C" PRIMARY KEY,
	qty bigint NOT NULL CHECK (qty BETWEEN 0 AND ` + max + `),
	version bigint NOT NULL DEFAULT 0,
	fence bigint NOT NULL DEFAULT 0,
	on_orders bigint NOT NULL DEFAULT 0)`,
		`CREATE TABLE IF NOT EXISTS ` + quote(SegmentsTable(o.table)) + ` (
	sku text COLLATE "C" NOT NULL,
	seg int NOT NULL,
	qty bigint NOT NULL CHECK (qty BETWEEN 0 AND ` + max + `),
	PRIMARY KEY (sku, seg))`,
		`CREATE TABLE IF NOT EXISTS ` + quote(OrdersTable(o.table)) + ` (
	id text COLLATE "C" PRIMARY KEY,
	kind smallint NOT NULL,
	state smallint NOT NULL,
	deadline timestamptz NULL,
	created_at timestamptz NOT NULL,
	changed_at timestamptz NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ` + quote(OrderLinesTable(o.table)) + ` (
	order_id text COLLATE "C" NOT NULL,
	sku text COLLATE "C" NOT NULL,
	qty bigint NOT NULL,
	expires timestamptz NULL,
	PRIMARY KEY (order_id, sku))`,
		`CREATE TABLE IF NOT EXISTS ` + quote(FencesTable(o.table)) + ` (
	name text COLLATE "C" PRIMARY KEY,
	epoch bigint NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS ` + quote(o.table+"_held") + ` ON ` + quote(OrderLinesTable(o.table)) + ` (sku, expires) WHERE expires IS NOT NULL`,
		addOnOrders(o.table),
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("pglock: create schema of %s: %w", o.table, err)
		}
	}
	return nil
}

// addOnOrders is the statement that gives a stock table made before
// on_orders existed the column, filled with the units of the ledger's open
// orders. It looks in the catalog first, so that on a table that has it
// nothing takes the lock ALTER TABLE needs; a concurrent CreateSchema that
// added it first makes the ALTER fail with duplicate_column, and the
// block's exception handler undoes this one's part.
func addOnOrders(table string) string {
	s, l, o := quote(table), quote(OrderLinesTable(table)), quote(OrdersTable(table))
	return `DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('` + s + `') AND attname = 'on_orders' AND NOT attisdropped) THEN
		ALTER TABLE ` + s + ` ADD COLUMN on_orders bigint NOT NULL DEFAULT 0;
		UPDATE ` + s + ` t SET on_orders = u.units FROM (` + fmt.Sprintf(
		"SELECT l.sku, SUM(l.qty) AS units FROM %s l JOIN %s o ON o.id = l.order_id WHERE o.kind <> %d AND o.state IN (%d, %d) GROUP BY l.sku",
		l, o, kindRestock, stockguard.OrderHeld, stockguard.OrderTaken) + `) u WHERE t.sku = u.sku;
	END IF;
EXCEPTION WHEN duplicate_column THEN
	NULL;
END $$`
}

// SegmentsTable returns the name of NewSegmented's table for the stock
// table table: table + "_segments".
func SegmentsTable(table string) string { return table + "_segments" }

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

// quote quotes an identifier that passed the identifier check.
func quote(name string) string { return `"` + name + `"` }

// queries are the statements of one table, built once per instance.
type queries struct {
	setStock string // sku, qty
	stock    string // sku → qty
	take     string // qty, sku → qty left: the conditional decrement
	lockRow  string // sku → qty; FOR UPDATE plus the lock mode's suffix
	takeHeld string // qty, sku: decrement of a row this transaction has locked
	read     string // sku → qty, version
	cas      string // qty, sku, version
	setQty   string // qty, sku: a blind write, for a transaction that read the row
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
		// the one it read (no ABA).
		setStock: "INSERT INTO " + t + " AS s (sku, qty) VALUES ($1, $2) ON CONFLICT (sku) DO UPDATE SET qty = EXCLUDED.qty, version = s.version + 1",
		stock:    "SELECT qty FROM " + t + " WHERE sku = $1",
		take:     "UPDATE " + t + " SET qty = qty - $1, version = version + 1 WHERE sku = $2 AND qty >= $1 RETURNING qty",
		lockRow:  "SELECT qty FROM " + t + " WHERE sku = $1" + lock,
		takeHeld: "UPDATE " + t + " SET qty = qty - $1, version = version + 1 WHERE sku = $2",
		read:     "SELECT qty, version FROM " + t + " WHERE sku = $1",
		cas:      "UPDATE " + t + " SET qty = $1, version = version + 1 WHERE sku = $2 AND version = $3",
		setQty:   "UPDATE " + t + " SET qty = $1, version = version + 1 WHERE sku = $2",
	}
}
