package mysqllock

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
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
// deadlock; the few paths that cannot keep to it (reclaiming an expired
// hold while a refusal is explained) roll back first and reclaim in a
// transaction of their own.
type ledger struct {
	store
	lq      ledgerQueries
	retrier *strategy.Retrier
	session *sessionInit // applied to every connection the ledger uses; nil: none
	multi   *multiStatements
	table   string
	fence   *fence // a fenced view's (see Fenced); nil: unfenced
}

func newLedger(db *sqlx.DB, o options, session *sessionInit) ledger {
	return ledger{
		store:   newStore(db, o),
		lq:      newLedgerQueries(o.table),
		retrier: strategy.NewRetrier(o.retryPolicy(strategy.RetryPolicy{})),
		session: session,
		multi:   &multiStatements{},
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

// Server error numbers of the ledger (MySQL and MariaDB share them).
const (
	erDupEntry     = 1062 // a duplicate primary key: the ID is recorded already
	erNoSuchTable  = 1146 // no ledger: a table made before the ledger existed
	erBadField     = 1054 // no on_orders or line_list column: a table made before it existed
	erDupFieldName = 1060 // a column added already
)

func isServerError(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}

// Internal outcomes of a transaction that rolled back, resolved after it.
var (
	errDuplicate = errors.New("mysqllock: the order ID is recorded already")
	errShort     = errors.New("mysqllock: a line did not fit")
	errNoChange  = errors.New("mysqllock: nothing to change")
)

// now is the server's clock in every statement: UTC, so that DATETIME
// values mean the same to every session whatever its time_zone.
const now = "UTC_TIMESTAMP(6)"

type ledgerQueries struct {
	stock, orders, lines string // quoted table names

	insertTaken    string // (id, kind, state, line_list): a row of a Take or a Restock, see recordStmts
	insertHeld     string // (id, kind, state, ttl µs): a row of a Hold, its deadline from holdClock
	insertHeldLine string // (order_id, sku, qty, ttl µs): a hold's line row, its expires from holdClock
	record         string // id → kind, state, expired, deadline µs, then recordLines' columns
	lockOrder      string // id → kind, state, expired, line_list; locks the order row
	confirm        string // id: held → taken, before the deadline
	setState       string // state, id
	clearExpires   string // id
	orderLines     string // id → sku, qty in SKU order: the line rows
	candidates     string // sku, after → IDs past after of held orders with a line of sku whose deadline passed
	level          string // sku → qty, whether sku has expired holds
	hasExpired     string // sku → whether sku has expired holds
	lockLevel      string // sku → qty, locking the row
	restock        string // qty, sku, MaxQty - qty
	lockUnits      string // sku → qty, units of sku on open orders (held or taken); locks the row
	takeOrdered    string // qty, qty, sku, qty: the conditional decrement of an order's single line
}

// recordLines are the columns, of the orders table o LEFT JOIN the lines
// table l, that every read of an order's lines selects: its line_list,
// and one line row — an order has the one or the others (see CreateSchema),
// so an order of line_list comes in one row, its line columns NULL.
const recordLines = "o.line_list, l.sku, l.qty"

// recordColumns are the columns of an order's record that Order reads:
// kind, state, expired, deadline µs, then recordLines'.
const recordColumns = "o.kind, o.state, COALESCE(o.deadline <= " + now + ", FALSE), TIMESTAMPDIFF(MICROSECOND, '1970-01-01', o.deadline), " + recordLines

// records returns the query for the records of n orders, id IN (n
// placeholders): id, then recordColumns, a row per line row or one for an
// order of line_list (see scanRecord).
func (q ledgerQueries) records(n int) string {
	return "SELECT o.id, " + recordColumns + " FROM " + q.orders + " o LEFT JOIN " + q.lines + " l ON l.order_id = o.id WHERE o.id IN (" + list(n) + ")"
}

// candidateBatch bounds how many expired holds one reclaiming transaction
// takes on.
const candidateBatch = 256

func newLedgerQueries(table string) ledgerQueries {
	s, o, l := quote(table), quote(OrdersTable(table)), quote(OrderLinesTable(table))
	expired := "EXISTS(SELECT 1 FROM " + l + " WHERE " + l + ".sku = " + s + ".sku AND expires <= " + now + ")"
	return ledgerQueries{
		stock: s, orders: o, lines: l,
		insertTaken:    "(?, ?, ?, NULL, " + now + ", " + now + ", ?)",
		insertHeld:     "(?, ?, ?, " + holdClock + " + INTERVAL ? MICROSECOND, " + holdClock + ", " + holdClock + ", NULL)",
		insertHeldLine: "(?, ?, ?, " + holdClock + " + INTERVAL ? MICROSECOND)",
		record: "SELECT " + recordColumns + " FROM " + o + " o LEFT JOIN " + l +
			" l ON l.order_id = o.id WHERE o.id = ? ORDER BY l.sku",
		lockOrder:    "SELECT kind, state, COALESCE(deadline <= " + now + ", FALSE), line_list FROM " + o + " WHERE id = ? FOR UPDATE",
		confirm:      fmt.Sprintf("UPDATE %s SET state = %d, changed_at = %s WHERE id = ? AND kind = %d AND state = %d AND deadline > %s", o, stockguard.OrderTaken, now, kindHold, stockguard.OrderHeld, now),
		setState:     "UPDATE " + o + " SET state = ?, changed_at = " + now + " WHERE id = ?",
		clearExpires: "UPDATE " + l + " SET expires = NULL WHERE order_id = ?",
		orderLines:   "SELECT sku, qty FROM " + l + " WHERE order_id = ? ORDER BY sku",
		candidates:   fmt.Sprintf("SELECT DISTINCT order_id FROM %s WHERE sku = ? AND expires <= %s AND order_id > ? ORDER BY order_id LIMIT %d", l, now, candidateBatch),
		level:        "SELECT qty, " + expired + " FROM " + s + " WHERE sku = ?",
		hasExpired:   "SELECT EXISTS(SELECT 1 FROM " + l + " WHERE sku = ? AND expires <= " + now + ")",
		lockLevel:    "SELECT qty FROM " + s + " WHERE sku = ? FOR UPDATE",
		restock:      "UPDATE " + s + " SET qty = qty + ?, version = version + 1 WHERE sku = ? AND qty <= ?",
		lockUnits:    "SELECT qty, on_orders FROM " + s + " WHERE sku = ? FOR UPDATE",
		takeOrdered:  "UPDATE " + s + " SET qty = qty - ?, on_orders = on_orders + ?, version = version + 1 WHERE sku = ? AND qty >= ?",
	}
}

// list returns n comma-separated placeholders.
func list(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// newOrder is an order to record: its ID, kind, hold ttl, and lines in SKU
// order.
type newOrder struct {
	id    string
	kind  orderKind
	ttl   time.Duration // holds
	lines []stockguard.Line
}

// record inserts orders, sorted by ID, and the line rows of holds in tx:
// errDuplicate when an ID is recorded already (by a transaction that
// committed; one that has not makes the INSERT wait for it), so that of
// two calls with one ID at most one commits. Order rows go first: a
// concurrent duplicate waits on its ID before it has locked anything else.
func (l *ledger) record(ctx context.Context, tx *sqlx.Tx, orders []newOrder) error {
	return l.recordStmts(orders).run(ctx, func(ctx context.Context, q string, args ...any) error {
		_, err := execBound(ctx, tx, q, args...)
		return err
	})
}

// recordSQL is record's statements, in the order they run, and the
// arguments of each.
type recordSQL struct {
	stmts []string
	args  [][]any
}

func (r *recordSQL) add(q string, args []any) {
	r.stmts = append(r.stmts, q)
	r.args = append(r.args, args)
}

// allArgs returns the arguments of every statement, in order: those of
// the statements joined into one multi-statement query.
func (r recordSQL) allArgs() []any { return slices.Concat(r.args...) }

// run sends the statements one by one through exec: errDuplicate when an
// ID is recorded already, else the classified error.
func (r recordSQL) run(ctx context.Context, exec func(ctx context.Context, q string, args ...any) error) error {
	for i, q := range r.stmts {
		if err := exec(ctx, q, r.args[i]...); err != nil {
			if isServerError(err, erDupEntry) {
				return errDuplicate
			}
			return classify(ctx, err, unsent)
		}
	}
	return nil
}

// holdClock is the session variable that carries the server's clock from
// the statement that reads it to the rows of the holds: a hold's deadline
// and its lines' expires are then one value, written without a subquery
// per line.
const holdClock = "@stockguard_now"

// recordStmts returns record's statements: the order rows, a Take's and a
// Restock's lines in its row (line_list), and, when orders has holds,
// their line rows, after the statement that sets holdClock.
func (l *ledger) recordStmts(orders []newOrder) recordSQL {
	var r recordSQL
	var b strings.Builder
	b.WriteString("INSERT INTO " + l.lq.orders + " (id, kind, state, deadline, created_at, changed_at, line_list) VALUES ")
	args := make([]any, 0, 4*len(orders))
	nlines := 0
	for i, o := range orders {
		if i > 0 {
			b.WriteString(", ")
		}
		if o.kind == kindHold {
			b.WriteString(l.lq.insertHeld)
			args = append(args, o.id, o.kind, stockguard.OrderHeld, micros(o.ttl))
			nlines += len(o.lines)
			continue
		}
		b.WriteString(l.lq.insertTaken)
		args = append(args, o.id, o.kind, stockguard.OrderTaken, lineList(o))
	}
	if nlines == 0 {
		r.add(b.String(), args)
		return r
	}
	r.add("SET "+holdClock+" = "+now, nil)
	r.add(b.String(), args)
	b.Reset()
	b.WriteString("INSERT INTO " + l.lq.lines + " (order_id, sku, qty, expires) VALUES ")
	args = make([]any, 0, 4*nlines)
	first := true
	for _, o := range orders {
		if o.kind != kindHold {
			continue
		}
		for _, ln := range o.lines {
			if !first {
				b.WriteString(", ")
			}
			first = false
			b.WriteString(l.lq.insertHeldLine)
			args = append(args, o.id, ln.SKU, ln.Qty, micros(o.ttl))
		}
	}
	r.add(b.String(), args)
	return r
}

// lineList returns the line_list column of o's row: its lines encoded
// (see appendLineList), or nil — NULL — for a hold, whose lines are rows of
// the lines table.
func lineList(o newOrder) []byte {
	if o.kind == kindHold {
		return nil
	}
	return appendLineList(nil, o.lines)
}

// appendLineList appends lines (in SKU order) to dst as line_list holds
// them: per line the SKU in hexadecimal, a colon and the units in decimal,
// lines separated by commas — "736b75:3,736b76:1". Text the server splits
// too (SUBSTRING_INDEX, UNHEX: see openUnitsSQL), whatever bytes a SKU
// has.
func appendLineList(dst []byte, lines []stockguard.Line) []byte {
	for i, ln := range lines {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = hex.AppendEncode(dst, []byte(ln.SKU))
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, ln.Qty, 10)
	}
	return dst
}

// parseLineList returns the lines appendLineList encoded in b.
func parseLineList(b []byte) ([]stockguard.Line, error) {
	lines := make([]stockguard.Line, 0, 1+bytes.Count(b, []byte{','}))
	for item := range bytes.SplitSeq(b, []byte{','}) {
		sku, qty, ok := bytes.Cut(item, []byte{':'})
		if !ok {
			return nil, fmt.Errorf("mysqllock: malformed line_list %q", b)
		}
		s, err := hex.AppendDecode(nil, sku)
		if err != nil {
			return nil, fmt.Errorf("mysqllock: malformed line_list %q: %w", b, err)
		}
		n, err := strconv.ParseInt(string(qty), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("mysqllock: malformed line_list %q: %w", b, err)
		}
		lines = append(lines, stockguard.Line{SKU: string(s), Qty: n})
	}
	return lines, nil
}

// micros returns d in whole microseconds, rounded up: a hold never ends
// before its ttl.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// takeLines takes every line, in SKU order, in one conditional UPDATE:
// errShort when a line did not fit, and the transaction must roll back.
// The UPDATE walks the primary key in order, so it locks the rows in SKU
// order, as every transaction of the package does.
func (l *ledger) takeLines(ctx context.Context, tx *sqlx.Tx, lines []stockguard.Line, ordered bool) error {
	query, args := l.takeStmt(lines, ordered)
	res, err := execBound(ctx, tx, query, args...)
	if err != nil {
		return classify(ctx, err, unsent)
	}
	// Rows matched equals rows changed (see Atomic.take).
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return classify(ctx, err, unsent)
	case n != int64(len(lines)):
		return errShort
	}
	return nil
}

// takeStmt returns the conditional UPDATE that takes lines (distinct SKUs,
// in SKU order) and its arguments: it changes one row per line, or fewer
// when a line does not fit. The units of an order (ordered) go onto the
// row's on_orders; a Decrement's are gone for good.
func (l *ledger) takeStmt(lines []stockguard.Line, ordered bool) (string, []any) {
	switch {
	case len(lines) == 1 && ordered:
		return l.lq.takeOrdered, []any{lines[0].Qty, lines[0].Qty, lines[0].SKU, lines[0].Qty}
	case len(lines) == 1:
		return l.q.take, []any{lines[0].Qty, lines[0].SKU, lines[0].Qty}
	}
	cases, caseArgs := caseSKU(lines)
	in := make([]any, 0, len(lines))
	for _, ln := range lines {
		in = append(in, ln.SKU)
	}
	set, args := "qty = qty - "+cases, caseArgs
	if ordered {
		set += ", on_orders = on_orders + " + cases
		args = slices.Concat(caseArgs, caseArgs)
	}
	query := "UPDATE " + l.lq.stock + " SET " + set + ", version = version + 1 WHERE sku IN (" + list(len(lines)) + ") AND qty >= " + cases
	return query, slices.Concat(args, in, caseArgs)
}

// moveUnits is the SET of an UPDATE that adds delta — a CASE sku … END
// whose arguments come twice — to the rows' qty and takes it off their
// on_orders: units of orders that closed (delta > 0) or were placed
// (delta < 0) move between the two.
func moveUnits(delta string) string {
	return "qty = qty + " + delta + ", on_orders = on_orders - " + delta
}

// caseSKU returns CASE sku WHEN ? THEN ? … END and its arguments.
func caseSKU(lines []stockguard.Line) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 2*len(lines))
	b.WriteString("CASE sku")
	for _, ln := range lines {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, ln.SKU, ln.Qty)
	}
	b.WriteString(" END")
	return b.String(), args
}

// credit gives the lines (distinct SKUs, in SKU order) of orders that
// closed back to the stock, off the rows' on_orders.
func (l *ledger) credit(ctx context.Context, tx *sqlx.Tx, lines []stockguard.Line) error {
	if len(lines) == 0 {
		return nil
	}
	cases, args := caseSKU(lines)
	in := make([]any, len(lines))
	for i, ln := range lines {
		in[i] = ln.SKU
	}
	_, err := execBound(ctx, tx, "UPDATE "+l.lq.stock+" SET "+moveUnits(cases)+", version = version + 1 WHERE sku IN ("+list(len(lines))+")", slices.Concat(args, args, in)...)
	return classify(ctx, err, unsent)
}

// short answers a request whose lines did not all fit, after the
// transaction (or statement) that tried them changed nothing. It reads
// their rows once: a SKU without a row is ErrUnknownSKU (rows are never
// deleted, so it had none before either); a line with too few units is
// ErrInsufficientStock — a refusal true at the moment of the read — unless
// expired holds of its SKU have units to give back. Then one transaction
// reclaims them and tries the lines again (recording o, unless nil), and
// its verdict is final: it keeps what it reclaimed also when the lines
// still do not fit. When every line fits by the time of the read, the
// request is tried again (strategy.Retry).
func (l *ledger) short(ctx context.Context, conn *sqlx.Conn, o *newOrder, lines []stockguard.Line) error {
	reclaim, err := l.explain(ctx, conn, lines)
	if len(reclaim) == 0 {
		return err
	}
	fits := true
	err = inTx(ctx, conn, func(tx *sqlx.Tx) error {
		if _, err := l.reclaimIn(ctx, tx, reclaim...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT reclaimed"); err != nil {
			return classify(ctx, err, unsent)
		}
		if o != nil {
			if err := l.record(ctx, tx, []newOrder{*o}); err != nil {
				return err
			}
		}
		err := l.takeLines(ctx, tx, lines, o != nil)
		if errors.Is(err, errShort) {
			fits = false
			_, err = tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT reclaimed")
			return classify(ctx, err, unsent)
		}
		return err
	})
	switch {
	case err != nil && o != nil:
		return l.settle(ctx, conn, err, *o)
	case err != nil || fits:
		return err
	}
	_, err = l.explain(ctx, conn, lines)
	return err
}

// explain reads the rows of lines, which did not all fit, and returns the
// verdict (see short) without reclaiming, and the SKUs of short lines that
// have expired holds.
func (l *ledger) explain(ctx context.Context, conn *sqlx.Conn, lines []stockguard.Line) (reclaim []string, err error) {
	skus := make([]any, len(lines))
	for i, ln := range lines {
		skus[i] = ln.SKU
	}
	type level struct {
		qty     int64
		expired bool
	}
	have := make(map[string]level, len(lines))
	err = eachRow(ctx, conn, "SELECT sku, qty, EXISTS(SELECT 1 FROM "+l.lq.lines+" l WHERE l.sku = s.sku AND l.expires <= "+now+") FROM "+
		l.lq.stock+" s WHERE sku IN ("+list(len(skus))+")", skus, func(rows *sql.Rows) error {
		var sku string
		var lv level
		err := rows.Scan(&sku, &lv.qty, &lv.expired)
		have[sku] = lv
		return err
	})
	if isServerError(err, erNoSuchTable) {
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
// It locks the expired orders' rows after whatever tx holds already,
// against the package's lock order: a deadlock it causes is broken by
// InnoDB and retried like any other.
//
// It walks the candidates in ID order, a batch at a time, each batch past
// the last ID of the one before, and stops only when a batch comes back
// short. Under REPEATABLE READ the candidates come from tx's snapshot, so
// a batch may name holds that another transaction reclaimed since; those
// end nothing here, and walking on past them (rather than stopping at a
// batch that ended nothing) is what reaches the rest however many there
// are.
func (l *ledger) reclaimIn(ctx context.Context, tx *sqlx.Tx, skus ...string) (int, error) {
	total := 0
	for _, sku := range skus {
		after := ""
		for {
			var ids []string
			if err := selectBound(ctx, tx, &ids, l.lq.candidates, sku, after); err != nil {
				return total, classify(ctx, err, unsent)
			}
			if len(ids) == 0 {
				break
			}
			after = ids[len(ids)-1]
			n, err := l.expireIn(ctx, tx, ids)
			total += n
			if err != nil {
				return total, err
			}
			if len(ids) < candidateBatch {
				break
			}
		}
	}
	return total, nil
}

// expire ends the holds among ids (sorted) whose deadline has passed, in
// one transaction, and returns how many it ended.
func (l *ledger) expire(ctx context.Context, conn *sqlx.Conn, ids []string) (int, error) {
	var n int
	err := inTx(ctx, conn, func(tx *sqlx.Tx) error {
		var err error
		n, err = l.expireIn(ctx, tx, ids)
		return err
	})
	return n, err
}

// expireIn is expire within tx. The state moves from held to expired under
// the order row's lock, checked against the deadline there, and the units
// go back in the same transaction: exactly once, and never for a hold that
// a concurrent Confirm made taken before its deadline.
func (l *ledger) expireIn(ctx context.Context, tx *sqlx.Tx, ids []string) (int, error) {
	in := make([]any, len(ids))
	for i, id := range ids {
		in[i] = id
	}
	var due []string
	err := selectBound(ctx, tx, &due, fmt.Sprintf("SELECT id FROM %s WHERE id IN (%s) AND state = %d AND deadline <= %s ORDER BY id FOR UPDATE",
		l.lq.orders, list(len(in)), stockguard.OrderHeld, now), in...)
	if err != nil || len(due) == 0 {
		return 0, classify(ctx, err, unsent)
	}
	in = in[:0]
	for _, id := range due {
		in = append(in, id)
	}
	ins := list(len(in))
	if _, err := execBound(ctx, tx, fmt.Sprintf("UPDATE %s SET state = %d, changed_at = %s WHERE id IN (%s)", l.lq.orders, stockguard.OrderExpired, now, ins), in...); err != nil {
		return 0, classify(ctx, err, unsent)
	}
	var back []stockguard.Line
	err = eachRow(ctx, tx, "SELECT sku, SUM(qty) FROM "+l.lq.lines+" WHERE order_id IN ("+ins+") GROUP BY sku ORDER BY sku", in, func(rows *sql.Rows) error {
		var ln stockguard.Line
		err := rows.Scan(&ln.SKU, &ln.Qty)
		back = append(back, ln)
		return err
	})
	if err != nil {
		return 0, err
	}
	if _, err := execBound(ctx, tx, "UPDATE "+l.lq.lines+" SET expires = NULL WHERE order_id IN ("+ins+")", in...); err != nil {
		return 0, classify(ctx, err, unsent)
	}
	return len(due), l.credit(ctx, tx, back)
}

// orderRecord is what the ledger holds of one ID.
type orderRecord struct {
	kind     orderKind
	state    stockguard.OrderState
	expired  bool // a hold's deadline has passed (by the server's clock at the read)
	deadline sql.NullInt64
	lines    []stockguard.Line // in SKU order
}

// addLines adds the lines of one row of recordLines to rec.
func (rec *orderRecord) addLines(list []byte, sku sql.NullString, qty sql.NullInt64) error {
	switch {
	case list != nil:
		lines, err := parseLineList(list)
		rec.lines = append(rec.lines, lines...)
		return err
	case sku.Valid:
		rec.lines = append(rec.lines, stockguard.Line{SKU: sku.String, Qty: qty.Int64})
	}
	return nil
}

// effective is the record's state by the clock: a hold past its deadline
// is expired even before anyone has reclaimed it.
func (r orderRecord) effective() stockguard.OrderState {
	if r.state == stockguard.OrderHeld && r.expired {
		return stockguard.OrderExpired
	}
	return r.state
}

// scanRecord adds a row of records' query to the record of id in records.
func scanRecord(rows *sql.Rows, records map[string]orderRecord) error {
	var id string
	var rec orderRecord
	var list []byte
	var sku sql.NullString
	var qty sql.NullInt64
	if err := rows.Scan(&id, &rec.kind, &rec.state, &rec.expired, &rec.deadline, &list, &sku, &qty); err != nil {
		return err
	}
	rec.lines = records[id].lines
	err := rec.addLines(list, sku, qty)
	records[id] = rec
	return err
}

// read reads id's record in one statement (one consistent snapshot); ok is
// false when there is none.
func (l *ledger) read(ctx context.Context, conn *sqlx.Conn, id string) (rec orderRecord, ok bool, err error) {
	err = eachRow(ctx, conn, l.lq.record, []any{id}, func(rows *sql.Rows) error {
		var list []byte
		var sku sql.NullString
		var qty sql.NullInt64
		if err := rows.Scan(&rec.kind, &rec.state, &rec.expired, &rec.deadline, &list, &sku, &qty); err != nil {
			return err
		}
		ok = true
		return rec.addLines(list, sku, qty)
	})
	return rec, err == nil && ok, err
}

// readAll reads the records of ids in one statement (one consistent
// snapshot), as read does one; an ID with none is missing from the map.
func (l *ledger) readAll(ctx context.Context, conn *sqlx.Conn, ids []any) (map[string]orderRecord, error) {
	records := map[string]orderRecord{}
	err := eachRow(ctx, conn, l.lq.records(len(ids))+" ORDER BY o.id, l.sku", ids, func(rows *sql.Rows) error {
		return scanRecord(rows, records)
	})
	return records, err
}

// eachRow runs query, a read, on q (a connection or a transaction) and
// calls scan for every row, as a supervised read (see get). Its errors are
// classified; classify keeps the server's error in the chain, for
// isServerError.
func eachRow(ctx context.Context, q sqlx.QueryerContext, query string, args []any, scan func(*sql.Rows) error) error {
	done, err := enter(ctx, phaseRead)
	if err != nil {
		return err
	}
	defer done()
	query, args = bind(query, args)
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
			// Deleted by PurgeOrders since: the ID is free again.
			return strategy.Retry(errDuplicate)
		}
		return resolve(o.id, rec, o.kind, o.lines)
	case errors.Is(err, errShort):
		return l.short(ctx, conn, &o, o.lines)
	}
	return err
}
