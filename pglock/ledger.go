package pglock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/strategy"
)

// ledger is what the strategies that implement stockguard.Orders share:
// the store, the statements of the order ledger (OrdersTable,
// OrderLinesTable), and the one-transaction path of every Orders method.
//
// Every transaction takes its locks in one order — order rows (by ID),
// then their lines, then stock rows (by SKU) — so that two of them never
// deadlock. One path departs from it: a refusal that finds expired holds
// rolls back first and reclaims them in a transaction of its own. A
// deadlock the server breaks (40P01) is retried.
type ledger struct {
	store
	lq      ledgerQueries
	retrier *strategy.Retrier
	session *sessionInit // applied to every connection the ledger uses; nil: none
	table   string
	// fence is a fenced view's (see Fenced), fenceInvalid its name's
	// validation error; nil: unfenced.
	fence        *fence
	fenceInvalid error
}

func newLedger(db *sqlx.DB, o options, session *sessionInit) ledger {
	return ledger{
		store:   newStore(db, o),
		lq:      newLedgerQueries(o.table),
		retrier: strategy.NewRetrier(o.retryPolicy(strategy.RetryPolicy{})),
		session: session,
		table:   o.table,
	}
}

// orderKind is the call that applied an ID, as the ledger records it.
type orderKind int8

const (
	kindTake orderKind = iota + 1
	kindHold
	kindRestock
)

func (k orderKind) String() string {
	switch k {
	case kindTake:
		return "Take"
	case kindHold:
		return "Hold"
	case kindRestock:
		return "Restock"
	}
	return fmt.Sprintf("orderKind(%d)", int(k))
}

// Internal outcomes of a transaction that rolled back, resolved after it.
var (
	errDuplicate = errors.New("pglock: the order ID is recorded already")
	errShort     = errors.New("pglock: a line did not fit")
	errNoChange  = errors.New("pglock: nothing to change")
	errChanged   = errors.New("pglock: a row changed between a read and the write that relied on it")
)

// now is the server's clock in every statement: clock_timestamp(), the
// moment the statement runs, not now(), which PostgreSQL freezes at the
// start of the transaction — a transaction that waited for a row lock
// would judge deadlines by a clock that stopped when it began (confirm a
// hold that expired while it waited, miss one that expired meanwhile). As
// an uncorrelated subquery it is evaluated once per statement, so every
// row of a statement sees one moment and an index can serve expires <= it,
// which a volatile function in the WHERE clause prevents.
const now = "(SELECT clock_timestamp())"

type ledgerQueries struct {
	stock, orders, lines string // quoted table names

	record       string // ids, kinds, ttls µs; ids', skus, qtys: records orders and their lines in one statement
	placeOrder   string // id, kind, ttl µs: records an order of one line (placeOne's first round trip)
	placeLine    string // id, sku, qty: takes the order's line and records it, or deletes the order (its second)
	read         string // id → kind, state, expired, deadline, sku, qty: one row per line
	lockOrder    string // id → kind, state, expired; locks the order row
	confirm      string // id: held → taken, before the deadline
	setState     string // state, id
	clearExpires string // id
	orderLines   string // id → sku, qty in SKU order
	candidates   string // sku → IDs of held orders with a line of sku whose deadline passed
	level        string // sku → qty, whether sku has expired holds
	hasExpired   string // sku → whether sku has expired holds
	lockLevel    string // sku → qty, locking the row
	lockUnits    string // sku → qty, units of sku on open orders (held or taken); locks the row
	restock      string // qty, sku, MaxQty - qty
	lockSKUs     string // skus: locks their rows in SKU order
	lockLevels   string // skus → sku, qty, locking the rows in SKU order
	expiredOf    string // skus → those with expired holds
	takeOrdered  string // qty, sku: the conditional decrement of an order's single line
	takeBatch    string // qty, sku, ordered: a batch's conditional decrement, ordered of its units on orders
	takeGranted  string // qty, sku, ordered: a batch's decrement of a row this transaction has locked
	multiTake    string // skus, qtys: takes every line (of an order) that fits
	credit       string // skus, qtys: gives lines of orders that closed back
	explain      string // skus → sku, qty, whether sku has expired holds
	dueOrders    string // ids → those held past their deadline, locked in ID order
	expire       string // ids
	linesOf      string // ids → sku, SUM(qty) in SKU order
	clearAll     string // ids
}

// candidateBatch bounds how many expired holds one reclaiming transaction
// takes on.
const candidateBatch = 256

func newLedgerQueries(table string) ledgerQueries {
	s, o, l := quote(table), quote(OrdersTable(table)), quote(OrderLinesTable(table))
	expired := "EXISTS(SELECT 1 FROM " + l + " e WHERE e.sku = s.sku AND e.expires <= " + now + ")"
	return ledgerQueries{
		stock: s, orders: o, lines: l,
		// One statement records the orders (in ID order, so that two
		// batches lock their IDs alike) and their lines; a held line's
		// expires is its order's deadline, read back from the row just
		// written, so that the two are one value.
		record: "WITH c AS (SELECT clock_timestamp() AS t), " +
			"o AS (INSERT INTO " + o + " (id, kind, state, deadline, created_at, changed_at) " +
			"SELECT u.id, u.kind, " + orderColumns("u.kind", "u.ttl") + " " +
			"FROM unnest($1::text[], $2::smallint[], $3::bigint[]) AS u(id, kind, ttl), c ORDER BY u.id RETURNING id, deadline) " +
			"INSERT INTO " + l + " (order_id, sku, qty, expires) SELECT v.id, v.sku, v.qty, o.deadline " +
			"FROM unnest($4::text[], $5::text[], $6::bigint[]) AS v(id, sku, qty) JOIN o ON o.id = v.id",
		// An order of one line, in a transaction of two pipelined round
		// trips (placeOne). The first records the order: its ID is locked
		// from here to the end of the transaction, and a hold's deadline
		// counts from here.
		placeOrder: "INSERT INTO " + o + " (id, kind, state, deadline, created_at, changed_at) " +
			"SELECT $1::text, $2::smallint, " + orderColumns("$2::smallint", "$3::bigint") + " " +
			"FROM (SELECT clock_timestamp() AS t) c",
		// The second, sent with COMMIT: the stock row's conditional UPDATE,
		// then — reading its result, so after it — the line when it took
		// the units, or the deletion of the order when it did not, so that
		// a refusal commits nothing. The row stays locked from this
		// statement to the COMMIT that follows it in the same round trip,
		// not across one: on a hot SKU, where buyers queue on that lock,
		// its hold time is what a Take costs next to a Decrement.
		placeLine: "WITH t AS (UPDATE " + s + " SET qty = qty - $3::bigint, on_orders = on_orders + $3::bigint, version = version + 1 " +
			"WHERE sku = $2::text AND qty >= $3::bigint RETURNING 1), " +
			"d AS (DELETE FROM " + o + " WHERE id = $1::text AND NOT EXISTS (SELECT 1 FROM t)) " +
			"INSERT INTO " + l + " (order_id, sku, qty, expires) SELECT o.id, $2::text, $3::bigint, o.deadline " +
			"FROM " + o + " o WHERE o.id = $1::text AND EXISTS (SELECT 1 FROM t)",
		read: "SELECT o.kind, o.state, COALESCE(o.deadline <= " + now + ", FALSE), o.deadline, l.sku, l.qty FROM " +
			o + " o JOIN " + l + " l ON l.order_id = o.id WHERE o.id = $1 ORDER BY l.sku",
		lockOrder:    "SELECT kind, state, COALESCE(deadline <= " + now + ", FALSE) FROM " + o + " WHERE id = $1 FOR UPDATE",
		confirm:      fmt.Sprintf("UPDATE %s SET state = %d, changed_at = %s WHERE id = $1 AND kind = %d AND state = %d AND deadline > %s", o, stockguard.OrderTaken, now, kindHold, stockguard.OrderHeld, now),
		setState:     "UPDATE " + o + " SET state = $1, changed_at = " + now + " WHERE id = $2",
		clearExpires: "UPDATE " + l + " SET expires = NULL WHERE order_id = $1",
		orderLines:   "SELECT sku, qty FROM " + l + " WHERE order_id = $1 ORDER BY sku",
		candidates:   fmt.Sprintf("SELECT DISTINCT order_id FROM %s WHERE sku = $1 AND expires <= %s ORDER BY order_id LIMIT %d", l, now, candidateBatch),
		level:        "SELECT qty, " + expired + " FROM " + s + " s WHERE sku = $1",
		hasExpired:   "SELECT EXISTS(SELECT 1 FROM " + l + " WHERE sku = $1 AND expires <= " + now + ")",
		lockLevel:    "SELECT qty FROM " + s + " WHERE sku = $1 FOR UPDATE",
		restock:      "UPDATE " + s + " SET qty = qty + $1, version = version + 1 WHERE sku = $2 AND qty <= $3",
		lockUnits:    "SELECT qty, on_orders FROM " + s + " WHERE sku = $1 FOR UPDATE",
		lockSKUs:     "SELECT sku FROM " + s + " WHERE sku = ANY($1) ORDER BY sku FOR UPDATE",
		lockLevels:   "SELECT sku, qty FROM " + s + " WHERE sku = ANY($1) ORDER BY sku FOR UPDATE",
		expiredOf:    "SELECT DISTINCT sku FROM " + l + " WHERE sku = ANY($1) AND expires <= " + now,
		// Every statement that takes units for an order, or gives back
		// those of an order that closed, moves them between qty and
		// on_orders in the same UPDATE of the row.
		takeOrdered: "UPDATE " + s + " SET qty = qty - $1, on_orders = on_orders + $1, version = version + 1 WHERE sku = $2 AND qty >= $1",
		takeBatch:   "UPDATE " + s + " SET qty = qty - $1, on_orders = on_orders + $3, version = version + 1 WHERE sku = $2 AND qty >= $1",
		takeGranted: "UPDATE " + s + " SET qty = qty - $1, on_orders = on_orders + $3, version = version + 1 WHERE sku = $2",
		multiTake: "UPDATE " + s + " t SET qty = t.qty - v.qty, on_orders = t.on_orders + v.qty, version = t.version + 1 " +
			"FROM unnest($1::text[], $2::bigint[]) AS v(sku, qty) WHERE t.sku = v.sku AND t.qty >= v.qty",
		credit: "UPDATE " + s + " t SET qty = t.qty + v.qty, on_orders = t.on_orders - v.qty, version = t.version + 1 " +
			"FROM unnest($1::text[], $2::bigint[]) AS v(sku, qty) WHERE t.sku = v.sku",
		explain:   "SELECT sku, qty, " + expired + " FROM " + s + " s WHERE sku = ANY($1)",
		dueOrders: fmt.Sprintf("SELECT id FROM %s WHERE id = ANY($1) AND state = %d AND deadline <= %s ORDER BY id FOR UPDATE", o, stockguard.OrderHeld, now),
		expire:    fmt.Sprintf("UPDATE %s SET state = %d, changed_at = %s WHERE id = ANY($1)", o, stockguard.OrderExpired, now),
		linesOf:   "SELECT sku, SUM(qty)::bigint FROM " + l + " WHERE order_id = ANY($1) GROUP BY sku ORDER BY sku",
		clearAll:  "UPDATE " + l + " SET expires = NULL WHERE order_id = ANY($1)",
	}
}

// orderColumns is the state, deadline, created_at and changed_at of a new
// order row of kind (an SQL expression) with a hold's ttl in µs, at c.t:
// the one rule of both statements that record orders.
func orderColumns(kind, ttl string) string {
	return fmt.Sprintf("CASE WHEN %s = %d THEN %d ELSE %d END, ", kind, kindHold, stockguard.OrderHeld, stockguard.OrderTaken) +
		fmt.Sprintf("CASE WHEN %s = %d THEN c.t + %s * interval '1 microsecond' END, c.t, c.t", kind, kindHold, ttl)
}

// newOrder is an order to record: its ID, kind, hold ttl, and lines in SKU
// order.
type newOrder struct {
	id    string
	kind  orderKind
	ttl   time.Duration // holds
	lines []stockguard.Line
}

// record inserts orders and their lines in tx, in one statement:
// errDuplicate when an ID is recorded already (by a transaction that
// committed; one that has not makes the INSERT wait for it), so that of two
// calls with one ID at most one commits.
func (l *ledger) record(ctx context.Context, tx *sqlx.Tx, orders []newOrder) error {
	ids, kinds, ttls := make([]string, len(orders)), make([]int16, len(orders)), make([]int64, len(orders))
	var lids, skus []string
	var qtys []int64
	for i, o := range orders {
		ids[i], kinds[i], ttls[i] = o.id, int16(o.kind), micros(o.ttl)
		for _, ln := range o.lines {
			lids, skus, qtys = append(lids, o.id), append(skus, ln.SKU), append(qtys, ln.Qty)
		}
	}
	_, err := tx.ExecContext(ctx, l.lq.record, ids, kinds, ttls, lids, skus, qtys)
	if sqlstate(err) == sqlstateUniqueViolation {
		return errDuplicate
	}
	return classify(ctx, err, unsent)
}

// placeOne places an order of one line on conn in a transaction of two
// round trips, each pipelined on the pgx connection under conn: BEGIN and
// the order's INSERT (ledgerQueries.placeOrder), then the stock's UPDATE
// with the line's INSERT or the order's deletion (placeLine) and COMMIT.
// It returns nil, errDuplicate when the ID is recorded already (by a
// transaction that committed; one that has not makes the INSERT wait for
// it), errShort when the line did not fit and nothing was recorded, or a
// classified error.
//
// COMMIT is sent only after the server has answered that the ID is
// recorded in the open transaction: a caller who leaves before that is
// answered with its context's error and nothing can commit. From then on
// the ID stays locked until the transaction ends, so a repeat waits for
// it; a caller who leaves with the second round trip in flight is answered
// ErrOutcomeUnknown. The order is recorded before the stock is tried, so a
// refusal is decided under the ID's lock, and a retry of an order placed
// already is answered from its record, even when the stock is short by
// now.
//
// The connection never goes back to the pool inside the transaction: it is
// rolled back, or database/sql discards the connection.
func (l *ledger) placeOne(ctx context.Context, conn *sqlx.Conn, o newOrder) error {
	var placed error
	ran := false
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: pglock needs the pgx driver (github.com/jackc/pgx/v5/stdlib), not %T", stockguard.ErrUnavailable, dc)
		}
		ran = true
		placed = l.placeOnePipelined(ctx, c.Conn(), o)
		// Its error only makes database/sql discard the connection.
		return endTx(ctx, c.Conn())
	})
	switch {
	case ran:
		return placed
	case errors.Is(err, stockguard.ErrUnavailable):
		return err
	}
	return classify(ctx, err, unsent)
}

// placeOnePipelined is placeOne's two round trips on pc. It may leave the
// transaction open; placeOne ends it.
func (l *ledger) placeOnePipelined(ctx context.Context, pc *pgx.Conn, o newOrder) error {
	ln := o.lines[0]
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(l.lq.placeOrder, o.id, int16(o.kind), micros(o.ttl))
	err := pc.SendBatch(ctx, b).Close()
	switch {
	case sqlstate(err) == sqlstateUniqueViolation:
		return errDuplicate
	case err != nil:
		return classify(ctx, err, unsent)
	}
	if err := ended(ctx); err != nil {
		return err // before COMMIT was sent: it never will be
	}
	b = &pgx.Batch{}
	b.Queue(l.lq.placeLine, o.id, ln.SKU, ln.Qty)
	b.Queue("COMMIT")
	br := pc.SendBatch(ctx, b)
	tag, err := br.Exec()
	if err != nil {
		br.Close()
		if sqlstate(err) != "" {
			// The server's answer to the statement: it failed, and the
			// COMMIT behind it was skipped.
			return classify(ctx, err, unsent)
		}
		return classify(ctx, err, sent)
	}
	_, err = br.Exec()
	// The COMMIT's reply decides; a failure reading past it closes the
	// connection, which placeOne then discards.
	br.Close()
	if err != nil {
		return commitError(ctx, err)
	}
	if tag.RowsAffected() == 0 {
		return errShort
	}
	return nil
}

// endTx leaves pc outside a transaction, rolling back one left open. It
// returns driver.ErrBadConn, which makes database/sql discard the
// connection, when pc is closed or the ROLLBACK fails (the server rolls
// back when the session ends).
func endTx(ctx context.Context, pc *pgx.Conn) error {
	if pc.IsClosed() {
		return driver.ErrBadConn
	}
	if pc.PgConn().TxStatus() == 'I' {
		return nil
	}
	if err := pc.PgConn().Exec(ctx, "ROLLBACK").Close(); err != nil || pc.PgConn().TxStatus() != 'I' {
		return driver.ErrBadConn
	}
	return nil
}

// micros returns d in whole microseconds, rounded up: a hold never ends
// before its ttl.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// split returns the SKUs and quantities of lines, as statement arrays.
func split(lines []stockguard.Line) ([]string, []int64) {
	skus, qtys := make([]string, len(lines)), make([]int64, len(lines))
	for i, ln := range lines {
		skus[i], qtys[i] = ln.SKU, ln.Qty
	}
	return skus, qtys
}

// takeLines takes every line (in SKU order) of an order in tx, onto the
// rows' on_orders: errShort when a line did not fit, and the transaction
// must roll back. Several lines are
// locked in SKU order first, as every transaction of the package does: an
// UPDATE … FROM locks rows in whatever order its plan visits them, and two
// carts locking in different orders would deadlock until the server's
// deadlock_timeout (1s by default) broke the cycle.
func (l *ledger) takeLines(ctx context.Context, tx *sqlx.Tx, lines []stockguard.Line) error {
	var res sql.Result
	var err error
	if len(lines) == 1 {
		res, err = tx.ExecContext(ctx, l.lq.takeOrdered, lines[0].Qty, lines[0].SKU)
	} else {
		skus, qtys := split(lines)
		if _, err := tx.ExecContext(ctx, l.lq.lockSKUs, skus); err != nil {
			return classify(ctx, err, unsent)
		}
		res, err = tx.ExecContext(ctx, l.lq.multiTake, skus, qtys)
	}
	if err != nil {
		return classify(ctx, err, unsent)
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return classify(ctx, err, unsent)
	case n != int64(len(lines)):
		return errShort
	}
	return nil
}

// credit gives the lines (distinct SKUs, in SKU order) of orders that
// closed back to the stock, off the rows' on_orders.
func (l *ledger) credit(ctx context.Context, tx *sqlx.Tx, lines []stockguard.Line) error {
	if len(lines) == 0 {
		return nil
	}
	skus, qtys := split(lines)
	if len(lines) > 1 { // in SKU order, as takeLines locks them
		if _, err := tx.ExecContext(ctx, l.lq.lockSKUs, skus); err != nil {
			return classify(ctx, err, unsent)
		}
	}
	_, err := tx.ExecContext(ctx, l.lq.credit, skus, qtys)
	return classify(ctx, err, unsent)
}

// short answers a request whose lines did not all fit, after the
// transaction (or statement) that tried them changed nothing. It reads
// their rows once: a SKU without a row is ErrUnknownSKU (rows are never
// deleted, so it had none before either); a line with too few units is
// ErrInsufficientStock — a refusal true at the moment of the read — unless
// expired holds of its SKU have units to give back. Then a transaction of
// its own reclaims them, and the request is tried again
// (strategy.Retry), as it is when every line fits by the time of the
// read.
//
// Reclaiming and retaking are two transactions, not one, because of
// PostgreSQL's deadlock detection: a reclaim locks the stock rows of every
// line of the expired holds, a set known only once they are read, so a
// retake in the same transaction would lock its own rows out of SKU order,
// and the server breaks such a cycle only after deadlock_timeout (1s by
// default). The units reclaimed are back for every buyer at once, the
// contract's promise; a buyer that gets them first is served first.
func (l *ledger) short(ctx context.Context, conn *sqlx.Conn, lines []stockguard.Line) error {
	reclaim, err := l.explain(ctx, conn, lines)
	if len(reclaim) == 0 {
		return err
	}
	n := 0
	err = inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
		var err error
		n, err = l.reclaimIn(ctx, tx, reclaim...)
		return err
	})
	switch {
	case err != nil:
		return err
	case n == 0: // another request reclaimed them first: explain anew
		return strategy.Retry(errChanged)
	}
	return strategy.Retry(errReclaimed)
}

var errReclaimed = errors.New("pglock: expired holds were reclaimed; trying again")

// explain reads the rows of lines, which did not all fit, and returns the
// verdict (see short) without reclaiming, and the SKUs of short lines that
// have expired holds.
func (l *ledger) explain(ctx context.Context, conn *sqlx.Conn, lines []stockguard.Line) (reclaim []string, err error) {
	skus, _ := split(lines)
	type level struct {
		qty     int64
		expired bool
	}
	have := make(map[string]level, len(lines))
	err = eachRow(ctx, conn, l.lq.explain, []any{skus}, func(rows *sql.Rows) error {
		var sku string
		var lv level
		err := rows.Scan(&sku, &lv.qty, &lv.expired)
		have[sku] = lv
		return err
	})
	if sqlstate(err) == sqlstateUndefinedTable {
		return nil, l.explainPlain(ctx, conn, lines)
	}
	if err != nil {
		return nil, err
	}
	var refusal error
	for _, ln := range lines {
		lv, ok := have[ln.SKU]
		switch {
		case !ok:
			return nil, unknownSKU(ln.SKU)
		case lv.qty >= ln.Qty:
			continue
		case lv.expired:
			reclaim = append(reclaim, ln.SKU)
		}
		if refusal == nil {
			refusal = insufficient(ln.SKU, ln.Qty, lv.qty)
		}
	}
	if refusal == nil {
		return nil, strategy.Retry(errChanged)
	}
	return reclaim, refusal
}

// explainPlain is explain for a stock table without a ledger, made before
// the ledger existed: no ledger, no holds. Only Decrement gets here.
func (l *ledger) explainPlain(ctx context.Context, conn *sqlx.Conn, lines []stockguard.Line) error {
	for _, ln := range lines {
		have, err := l.level(ctx, conn, ln.SKU)
		if err != nil {
			return err
		}
		if have < ln.Qty {
			return insufficient(ln.SKU, ln.Qty, have)
		}
	}
	return strategy.Retry(errChanged)
}

// reclaimIn gives the units of every hold of skus whose deadline has
// passed back to the stock, each exactly once, in tx, and returns how many
// holds it ended. That is what makes an expired hold's units available at
// once with no sweeper running: every path that would otherwise refuse a
// request, or report a level, for a SKU with expired holds calls it first,
// in the transaction that decides.
//
// It runs in a transaction that has recorded no order of its own: a hold
// recorded by the same transaction whose deadline passed while it waited
// for a row has no units taken yet, and reclaiming it would make stock out
// of nothing.
func (l *ledger) reclaimIn(ctx context.Context, tx *sqlx.Tx, skus ...string) (int, error) {
	total := 0
	for {
		// Every SKU's candidates first, then one expireIn: its credit locks
		// the stock rows in SKU order in one statement.
		var ids []string
		full := false
		for _, sku := range skus {
			var found []string
			if err := tx.SelectContext(ctx, &found, l.lq.candidates, sku); err != nil {
				return total, classify(ctx, err, unsent)
			}
			full = full || len(found) == candidateBatch
			ids = append(ids, found...)
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		if len(ids) == 0 {
			return total, nil
		}
		n, err := l.expireIn(ctx, tx, ids)
		total += n
		// Fewer expired than found: the rest changed state meanwhile, and
		// their lines say so by now.
		if err != nil || !full || n == 0 {
			return total, err
		}
	}
}

// expire ends the holds among ids whose deadline has passed, in one
// transaction, and returns how many it ended.
func (l *ledger) expire(ctx context.Context, conn *sqlx.Conn, ids []string) (int, error) {
	var n int
	err := inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
		var err error
		n, err = l.expireIn(ctx, tx, ids)
		return err
	})
	return n, err
}

// expireIn is expire within tx. The state moves from held to expired under
// the order row's lock, checked against the deadline there (a locking read
// re-checks its WHERE on the newest row after waiting), and the units go
// back in the same transaction: exactly once, and never for a hold that a
// concurrent Confirm made taken before its deadline.
func (l *ledger) expireIn(ctx context.Context, tx *sqlx.Tx, ids []string) (int, error) {
	var due []string
	if err := tx.SelectContext(ctx, &due, l.lq.dueOrders, ids); err != nil || len(due) == 0 {
		return 0, classify(ctx, err, unsent)
	}
	if _, err := tx.ExecContext(ctx, l.lq.expire, due); err != nil {
		return 0, classify(ctx, err, unsent)
	}
	var back []stockguard.Line
	err := eachRow(ctx, tx, l.lq.linesOf, []any{due}, func(rows *sql.Rows) error {
		var ln stockguard.Line
		err := rows.Scan(&ln.SKU, &ln.Qty)
		back = append(back, ln)
		return err
	})
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, l.lq.clearAll, due); err != nil {
		return 0, classify(ctx, err, unsent)
	}
	return len(due), l.credit(ctx, tx, back)
}

// orderRecord is what the ledger holds of one ID.
type orderRecord struct {
	kind     orderKind
	state    stockguard.OrderState
	expired  bool // a hold's deadline has passed (by the server's clock at the read)
	deadline sql.NullTime
	lines    []stockguard.Line // in SKU order
}

// effective is the record's state by the clock: a hold past its deadline
// is expired even before anyone has reclaimed it.
func (r orderRecord) effective() stockguard.OrderState {
	if r.state == stockguard.OrderHeld && r.expired {
		return stockguard.OrderExpired
	}
	return r.state
}

// read reads id's record in one statement (one consistent snapshot); ok is
// false when there is none.
func (l *ledger) read(ctx context.Context, q sqlx.QueryerContext, id string) (rec orderRecord, ok bool, err error) {
	err = eachRow(ctx, q, l.lq.read, []any{id}, func(rows *sql.Rows) error {
		var ln stockguard.Line
		err := rows.Scan(&rec.kind, &rec.state, &rec.expired, &rec.deadline, &ln.SKU, &ln.Qty)
		rec.lines = append(rec.lines, ln)
		return err
	})
	return rec, err == nil && len(rec.lines) > 0, err
}

// eachRow runs query, a read, on q (a connection or a transaction) and
// calls scan for every row. Its errors are classified; classify keeps the
// server's error in the chain, for sqlstate.
func eachRow(ctx context.Context, q sqlx.QueryerContext, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return classify(ctx, err, unsent)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return classify(ctx, err, unsent)
		}
	}
	return classify(ctx, rows.Err(), unsent)
}

// resolve answers a Take, Hold or Restock whose ID is recorded, from the
// record: the same call with the same lines is nil while the order is held
// or taken, ErrOrderClosed once it was returned or expired; anything else
// is ErrOrderMismatch.
func resolve(id string, rec orderRecord, kind orderKind, lines []stockguard.Line) error {
	if rec.kind != kind || !slices.Equal(rec.lines, lines) {
		return mismatch(id, rec.kind)
	}
	if !rec.effective().Open() {
		return errtext.Closed(id, rec.effective())
	}
	return nil
}

func mismatch(id string, kind orderKind) error {
	return errtext.Mismatch(id, kind.String())
}

func unknownOrder(id string) error {
	return errtext.UnknownOrder(id)
}

// settle answers a Take, Hold or Restock whose transaction ended with err:
// a recorded ID from its record, a line that did not fit by explain.
func (l *ledger) settle(ctx context.Context, conn *sqlx.Conn, err error, o newOrder) error {
	switch {
	case errors.Is(err, errDuplicate):
		rec, ok, err := l.read(ctx, conn, o.id)
		switch {
		case err != nil:
			return err
		case !ok:
			return strategy.Retry(errDuplicate)
		}
		return resolve(o.id, rec, o.kind, o.lines)
	case errors.Is(err, errShort):
		return l.short(ctx, conn, o.lines)
	}
	return err
}
