package mysqllock

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine"
	"github.com/stockguard/stockguard/internal/errtext"
	"github.com/stockguard/stockguard/strategy"
)

// Group commit of orders (NewBatched's Take, Hold, Confirm and Return).
//
// Every order call of an instance joins the queue of its lane (its ID's
// hash, see WithOrderLanes), whatever its SKUs, and a batch of them —
// carts of any number of lines from many buyers — is one transaction. A
// batch of Takes and Holds only first goes the optimistic way (placeFast),
// with no read at all:
//
//	START TRANSACTION
//	SET @stockguard_now = UTC_TIMESTAMP(6)      -- with holds: their deadlines and their lines' expires
//	INSERT INTO orders VALUES (…), (…), …       -- every order, IDs in order, a Take's lines in its row
//	INSERT INTO order_lines VALUES (…), (…), …  -- the lines of its holds, if any
//	UPDATE stock SET qty = qty - CASE sku … END WHERE sku IN (…) AND qty >= CASE sku … END
//	-- fails unless the UPDATE changed a row per SKU: ROLLBACK
//	COMMIT
//
// which locks the stock rows only with its last statement before COMMIT.
// When a line does not fit, or an ID is recorded already, it rolls back,
// having changed nothing, and the batch goes the locking way:
//
//	BEGIN
//	SELECT … FROM orders JOIN lines WHERE id IN (…) FOR UPDATE   -- only for Confirm/Return
//	SELECT sku, qty FROM stock WHERE sku IN (…) ORDER BY sku FOR UPDATE
//	-- decide each call in arrival order, in memory
//	INSERT INTO orders VALUES (…), (…), …       -- the orders granted
//	INSERT INTO order_lines VALUES (…), (…), …  -- the lines of the holds among them
//	UPDATE orders SET state = CASE id … END     -- only for Confirm/Return
//	UPDATE stock SET qty = qty + CASE sku … END WHERE sku IN (…)
//	COMMIT
//
// as does a batch with a Confirm or Return on a pool that sends statement
// by statement (on a multiStatements pool they go optimistically too, see
// settleFast). Orders on a SKU that a batch lately refused an order on
// (shortSKUs) are screened by a plain read first (screen).
//
// The lines of the batch are aggregated per SKU, each SKU row is locked
// once, in SKU order (one statement walking the primary key), so two
// batches — of this instance or another — never deadlock on stock rows.
// Each call is decided in arrival order against the levels read under
// those locks: an order whose lines all fit is granted and its units
// leave the running level; one that does not is refused on its own, is
// recorded nowhere, and leaves its batch-mates alone; a Return or an
// expired hold puts its units back for the calls after it. Either way,
// rows are locked in one order — order rows by ID, their lines, stock
// rows by SKU — or, on the locking way's placements, stock rows before the
// new orders' rows, which no other transaction can hold but one recording
// the same ID (that deadlock is detected, and the batch tried again).
// Nothing waits
// to fill a batch: a call that finds the queue idle goes out alone, and
// batches grow only while a transaction is in flight — one fsync per
// batch, however many orders it carries.
//
// Exactly once: two calls with one ID never share a batch (the later one
// waits for the next), and a Take or Hold whose ID is recorded already
// fails the batch's INSERT on the primary key: the transaction rolls back,
// the calls whose IDs are recorded are answered from their records, and
// the batch is tried again without them.
//
// Expired holds: when an order of the batch is short on a SKU with
// expired holds, the batch reclaims that SKU's expired holds in its own
// transaction, once (see ledger.reclaimIn), re-reads its rows and decides
// again; a batch with no short order never looks for them. A hold that
// expires is thus back for the first batch that needs its units, without
// a sweeper and without a transaction of its own.

// orderQueue prefixes the combiner keys of the order lanes (see
// WithOrderLanes).
const orderQueue = "orders/"

// orderOp is the call an orderCall carries.
type orderOp int8

const (
	opPlace   orderOp = iota + 1 // Take or Hold: order says which
	opConfirm                    // Confirm order.id
	opReturn                     // Return order.id
)

// orderCall is one order call in a batch, and what the batch decided for
// it.
type orderCall struct {
	op    orderOp
	order newOrder // opPlace: the order; otherwise only its id

	// final: answer stands whatever the batch's COMMIT does — a refusal
	// (nothing of the call was written), or an answer from the record that
	// changes nothing.
	final  bool
	answer error
	// refused: the batch decided a refusal (answer), which turns final
	// only once a locking read finds the call's ID unrecorded, and only
	// when the call does not fit the levels as read (alone: see alone).
	// Until then an error of the attempt answers the call, and the next
	// attempt decides it again: a repeat of a recorded order is never
	// refused, and a call refused for a batch-mate's grant is answered so
	// only by the commit that makes the grant true.
	refused bool
}

// result is c's answer once the write carrying it returned err: a final
// answer, else the write's error, else the answer the write made true.
func (c *orderCall) result(err error) error {
	switch {
	case c.final:
		return c.answer
	case err != nil:
		return err
	}
	return c.answer
}

func callID(c *orderCall) string { return c.order.id }

func newOrderCombiner(b *Batched, size int) *combine.Combiner[orderCall] {
	return combine.New(combine.Config[orderCall]{
		Size:   size,
		Write:  b.sendOrders,
		Answer: (*orderCall).result,
		Apart:  callID,
		Sealed: true,
	})
}

// sendOrders writes bt's calls in one transaction, retrying after a
// deadlock or a recorded ID, and at once, without the callers who left,
// when one left before the write carrying it was sent (see
// combine.Batch.Seal); it copies outcomes back only from an attempt that
// returned to it (see send).
func (b *Batched) sendOrders(ctx context.Context, _ string, bt *combine.Batch[orderCall]) error {
	return b.retrier.Do(ctx, func(ctx context.Context) error {
		for {
			// Each errLeft drops a caller who left: Members shrinks.
			if err := b.sendAttempt(ctx, bt); !errors.Is(err, errLeft) {
				return err
			}
		}
	})
}

// errLeft ends an attempt, before it sent a write, because a caller of
// the batch left: a request is never written after its caller left and
// was told so (see combine.Config.Sealed).
var errLeft = errors.New("mysqllock: a caller left before the batch's write was sent")

// sendAttempt is one attempt of sendOrders.
func (b *Batched) sendAttempt(ctx context.Context, bt *combine.Batch[orderCall]) error {
	var done atomic.Pointer[orderAttempt]
	ended, err := b.pinnedTracked(ctx, b.session, func(ctx context.Context, conn *sqlx.Conn) error {
		var a orderAttempt
		for _, c := range bt.Members() {
			if !c.final { // answered by an earlier attempt, for good
				a.of = append(a.of, c)
				a.work = append(a.work, orderCall{op: c.op, order: c.order})
			}
		}
		if len(a.work) == 0 {
			return nil
		}
		err := b.writeParts(ctx, conn, a.work, bt.Seal)
		done.Store(&a)
		return err
	})
	if a := done.Load(); a != nil {
		for i, c := range a.of {
			c.final, c.answer = a.work[i].final, a.work[i].answer
		}
	}
	select {
	case <-ended:
	default:
		// Its callers were answered (they left) while its statement
		// runs on: their IDs' lane stays busy until it ends, so that
		// a repeat on this instance cannot run beside it.
		bt.Continues(ended)
	}
	return err
}

// writeParts writes calls with writeOrders, in as many transactions, one
// after another, as the server's max_allowed_packet needs: each part's
// statements, interpolated, fit in one packet (see callBytes). A DSN's
// maxAllowedPacket below the server's makes the driver refuse a larger
// statement unsent: the parts are halved until they fit it. A part
// that committed has its answers final, so that an error of a later part
// is not theirs and a later attempt leaves them out.
func (b *Batched) writeParts(ctx context.Context, conn *sqlx.Conn, calls []orderCall, seal func() bool) error {
	limit := b.packet.Load()
	if limit == 0 {
		if err := get(ctx, conn, "SELECT @@max_allowed_packet", nil, &limit); err != nil {
			return classify(ctx, err, unsent)
		}
		b.packet.Store(limit)
	}
	for len(calls) > 0 {
		budget := limit - packetMargin
		n, size := 1, callBytes(&calls[0])
		for n < len(calls) && size+callBytes(&calls[n]) <= budget {
			size += callBytes(&calls[n])
			n++
		}
		part := calls[:n]
		err := b.writeOrders(ctx, conn, part, seal)
		if errors.Is(err, errTooLarge) && n > 1 {
			// The DSN's maxAllowedPacket is below the server's: the
			// driver sent nothing of the statement, and the part's
			// transaction was rolled back. Smaller parts, from now on.
			limit /= 2
			b.packet.Store(limit)
			continue
		}
		if err != nil || n == len(calls) {
			return err
		}
		for i := range part {
			part[i].final = true
		}
		calls = calls[n:]
	}
	return nil
}

// packetMargin is what a batch's statements need beyond its calls'
// callBytes: the statements' fixed text.
const packetMargin = 4096

// callBytes bounds the bytes c adds to the largest statement of a batch,
// interpolated: its ID and each line's SKU appear in a few statements
// (the orders' INSERT, the locking reads, the stock UPDATE's CASE and IN
// list, the lines' INSERT), each escaped to at most twice its bytes, with
// the numbers and punctuation around them; a hold's lines INSERT writes
// its ID again on every line. A Confirm or Return moves the lines of its
// record, unknown until read: as many as an order may have.
func callBytes(c *orderCall) int64 {
	n := int64(256 + 8*len(c.order.id))
	if c.op != opPlace {
		return n + stockguard.MaxLines*lineBytes(stockguard.MaxSKULen)
	}
	for _, ln := range c.order.lines {
		n += lineBytes(len(ln.SKU))
		if c.order.kind == kindHold {
			n += int64(16 + 2*len(c.order.id))
		}
	}
	return n
}

// lineBytes bounds the bytes of a line whose SKU has skuLen bytes (see
// callBytes).
func lineBytes(skuLen int) int64 { return int64(128 + 12*skuLen) }

// orderAttempt is one attempt of sendOrders: the calls it carried and the
// copies it wrote their outcome to.
type orderAttempt struct {
	of   []*orderCall
	work []orderCall
}

// writeOrders is one attempt at a batch: the transaction above, then, when
// an ID turned out recorded, the answers from the records. When the pool's
// connections take several statements in one round trip (see
// multiStatements), the transaction costs two: its BEGIN and the INSERTs
// that record the orders ride together (after the reads, on the locking
// way), and the other writes ride with its COMMIT.
//
// seal is called once the server has run the INSERT that locks the calls'
// IDs inside the transaction, before their writes can commit, on either
// kind of pool; when it reports false a caller left, and the attempt ends
// with errLeft, having written nothing. So a caller answered
// ErrOutcomeUnknown has its ID locked until the outcome is known, and a
// repeat's refusal, decided by a locking read of the ID, waits for it.
func (b *Batched) writeOrders(ctx context.Context, conn *sqlx.Conn, calls []orderCall, seal func() bool) error {
	multi, err := b.multiStatements(ctx, conn)
	if err != nil {
		return err
	}
	if done, err := b.placeFast(ctx, conn, multi, calls, seal); done {
		return err
	}
	err = errNeedsTx
	if multi {
		err = b.writeOrdersMulti(ctx, conn, calls, seal)
	}
	if errors.Is(err, errNeedsTx) {
		err = inTx(ctx, conn, func(tx *sqlx.Tx) error {
			if err := b.fenced(ctx, tx); err != nil {
				return err
			}
			g := groupTx{ledger: &b.ledger, q: tx, tx: tx, calls: calls, refused: b.short, seal: seal}
			return g.run(ctx)
		})
	}
	if errors.Is(err, errDuplicate) {
		return b.settleRecorded(ctx, conn, calls)
	}
	return err
}

// placeFast writes a batch of Takes and Holds that all fit without reading
// anything first: one placeAll of every order, their lines summed per SKU
// — two round trips on a multiStatements pool, the stock rows locked only
// by the UPDATE right before COMMIT, so a hot row is held for that UPDATE
// and the COMMIT alone. It reports false, having changed nothing, when the
// batch must go the locking way: it has a Confirm or Return and the pool
// sends statement by statement (on a multiStatements pool they go
// optimistically too, see settleFast), screen sent it there, a SKU's total
// is beyond stockguard.MaxQty, or its transaction rolled back because a
// line did not fit or an ID is recorded already. Orders screen refused
// stay refused (final) and are left out.
func (b *Batched) placeFast(ctx context.Context, conn *sqlx.Conn, multi bool, calls []orderCall, seal func() bool) (bool, error) {
	if !multi && slices.ContainsFunc(calls, func(c orderCall) bool { return c.op != opPlace }) {
		return false, nil
	}
	if ok, err := b.screen(ctx, conn, calls); err != nil || !ok {
		return err != nil, err
	}
	orders := make([]newOrder, 0, len(calls))
	totals := map[string]int64{}
	var settles []orderCall
	for _, c := range calls {
		switch {
		case c.final || c.refused:
			continue // refused by screen
		case c.op != opPlace:
			settles = append(settles, c)
			continue
		}
		orders = append(orders, c.order)
		for _, ln := range c.order.lines {
			totals[ln.SKU] = min(totals[ln.SKU]+ln.Qty, stockguard.MaxQty+1)
		}
	}
	lines := make([]stockguard.Line, 0, len(totals))
	for sku, qty := range totals {
		if qty > stockguard.MaxQty {
			return false, nil
		}
		lines = append(lines, stockguard.Line{SKU: sku, Qty: qty})
	}
	if len(orders) == 0 && len(settles) == 0 {
		return true, nil
	}
	slices.SortFunc(orders, func(x, y newOrder) int { return cmp.Compare(x.id, y.id) })
	if len(settles) > 0 {
		return b.settleFast(ctx, conn, orders, totals, settles, seal)
	}
	slices.SortFunc(lines, func(x, y stockguard.Line) int { return cmp.Compare(x.SKU, y.SKU) })
	err := b.placeAll(ctx, conn, multi, orders, lines, seal)
	if errors.Is(err, errShort) || errors.Is(err, errDuplicate) {
		return false, nil
	}
	return true, err
}

// shortSKUs remembers, for shortMemory, the SKUs on which a batch refused
// an order (too few units, or no row). A batch with an order on one of
// them reads those rows first (screen): placeFast would most likely roll
// back, and the batch pay for both. It decides only which way a batch
// goes and which rows it reads, never an answer.
type shortSKUs struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// shortMemory is how long shortSKUs remembers a SKU: a restock makes it
// worth trying placeFast again after that long.
const shortMemory = time.Second

// shortLimit bounds the SKUs shortSKUs remembers at once.
const shortLimit = 4096

func newShortSKUs() *shortSKUs { return &shortSKUs{until: map[string]time.Time{}} }

func (s *shortSKUs) mark(sku string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.until[sku]; !ok && len(s.until) >= shortLimit {
		for k, t := range s.until {
			if now.After(t) {
				delete(s.until, k)
			}
		}
		if len(s.until) >= shortLimit {
			clear(s.until)
		}
	}
	s.until[sku] = now.Add(shortMemory)
}

// any reports whether a line is on a SKU remembered.
func (s *shortSKUs) any(lines []stockguard.Line) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.until) == 0 {
		return false
	}
	now := time.Now()
	for _, ln := range lines {
		if t, ok := s.until[ln.SKU]; ok && now.Before(t) {
			return true
		}
	}
	return false
}

// errNeedsTx sends a batch from the multi-statement path to the
// transaction path: reclaiming expired holds runs the ledger's own
// statements in a database/sql transaction.
var errNeedsTx = errors.New("mysqllock: the batch needs a database/sql transaction")

// writeOrdersMulti is the batch's transaction in three round trips (two
// when it places no order; one more for refusedUnrecorded's locking read):
//
//	START TRANSACTION; SELECT … FOR UPDATE; SELECT id FROM orders …
//	INSERT …; INSERT …                 -- the orders granted: their IDs locked (see flush)
//	UPDATE …; UPDATE …; COMMIT
//
// A statement that fails stops the rest, COMMIT included: the transaction
// is still open and is rolled back. The connection must not go back to the
// pool inside a transaction, so when the ROLLBACK cannot be sent the
// connection is discarded.
func (b *Batched) writeOrdersMulti(ctx context.Context, conn *sqlx.Conn, calls []orderCall, seal func() bool) error {
	done, err := enter(ctx, phaseTx)
	if err != nil {
		return err
	}
	g := groupTx{ledger: &b.ledger, q: conn, calls: calls, begin: "START TRANSACTION; ", refused: b.short, seal: seal}
	err = g.run(ctx)
	done()
	if err == nil {
		if err = g.commit(ctx); err == nil {
			return nil
		}
	}
	if g.begin == "" { // START TRANSACTION was sent
		if _, rerr := conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn }) // database/sql closes it
		}
	}
	return err
}

// commit sends the writes the batch collected, and COMMIT, in one round
// trip, as a supervised write. A duplicate ID, or a refusal
// refusedBeforeCommit lists (a deadlock, a busy row, a read-only server, a
// missing privilege…), changed nothing. Any other failure may have come
// from COMMIT itself: the outcome is unknown.
func (g *groupTx) commit(ctx context.Context) error {
	done, err := enter(ctx, phaseWrite)
	if err != nil {
		return err
	}
	defer done()
	_, err = g.q.ExecContext(ctx, inline(strings.Join(append(g.pending, "COMMIT"), "; "), g.pendingArgs))
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mysql.ErrPktTooLarge):
		return classify(ctx, err, unsent) // not sent; writeOrdersMulti rolls back
	case isServerError(err, erDupEntry):
		return errDuplicate
	case errors.As(err, &me) && refusedBeforeCommit(me.Number):
		return classify(ctx, err, unsent)
	case errors.As(err, &me):
		return fmt.Errorf("%w: the batch's writes and COMMIT failed: %w", stockguard.ErrOutcomeUnknown, err)
	}
	return classify(ctx, err, sent)
}

// groupTx is the state of one batch's transaction.
type groupTx struct {
	*ledger
	q     querier  // tx, or the connection on the multi-statement path
	tx    *sqlx.Tx // nil on the multi-statement path
	calls []orderCall

	// The multi-statement path: begin prefixes the first read until it is
	// sent; writes collect in pending until commit.
	begin       string
	pending     []string
	pendingArgs []any
	recorded    []string // multi-statement path: IDs of the batch's orders recorded already

	refused *shortSKUs  // remembers the SKUs decide refuses orders on; nil: none
	seal    func() bool // called before the writes can commit (see writeOrders)

	records map[string]orderRecord // Confirm/Return IDs, locked
	levels  map[string]int64       // the batch's SKU rows, locked
}

func (g *groupTx) run(ctx context.Context) error {
	reclaimed := false
	for {
		if err := g.read(ctx); err != nil {
			return err
		}
		short := g.decide()
		if len(short) == 0 || reclaimed {
			break
		}
		// Orders were refused for want of units on short SKUs: give back
		// their expired holds, if any, and decide again on the new levels.
		reclaimed = true
		n, err := g.reclaimShort(ctx, short)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	if err := g.refusedUnrecorded(ctx); err != nil {
		return err
	}
	return g.write(ctx)
}

// refusedUnrecorded checks, under the IDs' locks, that no order the batch
// refuses is recorded already: a repeated Take or Hold is answered from
// its record (nil, or ErrOrderClosed), never refused. A recorded one makes the batch roll back
// with errDuplicate, to be answered as an INSERT's duplicate is. The
// refusals stand only once this check has passed; until then an error
// answers them too.
func (g *groupTx) refusedUnrecorded(ctx context.Context) error {
	var ids []any
	for i := range g.calls {
		if c := &g.calls[i]; c.op == opPlace && c.refused {
			ids = append(ids, c.order.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// A locking read, on both paths: an attempt with the same ID that has
	// recorded it but not yet committed — abandoned by its caller, running
	// on — is waited for and found if it commits. The multi-statement
	// path's plain read with the stock rows cannot see it.
	var found []string
	if err := sel(ctx, g.q, &found, "SELECT id FROM "+g.lq.orders+" WHERE id IN ("+list(len(ids))+") FOR UPDATE", ids...); err != nil {
		return classify(ctx, err, unsent)
	}
	if len(found) > 0 {
		return errDuplicate
	}
	for i := range g.calls {
		if c := &g.calls[i]; c.op == opPlace && c.refused && !alone(g.levels, c.order.lines) {
			c.final = true
		}
	}
	return nil
}

// alone reports whether lines fit levels, the levels as read: a call
// refused although they do was refused only for the units granted to the
// batch-mates before it (a Return or a reclaim only adds units), which
// stands only if those grants commit.
func alone(levels map[string]int64, lines []stockguard.Line) bool {
	for _, ln := range lines {
		if left, ok := levels[ln.SKU]; !ok || left < ln.Qty {
			return false
		}
	}
	return true
}

// read locks and reads the order records of the batch's Confirm and Return
// calls, then the stock rows of every SKU the batch may change, in SKU
// order.
func (g *groupTx) read(ctx context.Context) error {
	var ids []any
	for _, c := range g.calls {
		if c.op != opPlace {
			ids = append(ids, c.order.id)
		}
	}
	g.records = make(map[string]orderRecord, len(ids))
	if len(ids) > 0 {
		slices.SortFunc(ids, func(x, y any) int { return cmp.Compare(x.(string), y.(string)) })
		q := g.lq.records(len(ids)) + " ORDER BY o.id, l.sku FOR UPDATE"
		err := g.each(ctx, q, ids, func(rows *sql.Rows) error {
			return scanRecord(rows, g.records)
		})
		if err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	var skus []any
	add := func(lines []stockguard.Line) {
		for _, ln := range lines {
			if !seen[ln.SKU] {
				seen[ln.SKU] = true
				skus = append(skus, ln.SKU)
			}
		}
	}
	for _, c := range g.calls {
		if c.op == opPlace {
			add(c.order.lines)
		} else if rec, ok := g.records[c.order.id]; ok && rec.kind != kindRestock && rec.state.Open() {
			add(rec.lines)
		}
	}
	g.levels = make(map[string]int64, len(skus))
	if len(skus) == 0 {
		return nil
	}
	slices.SortFunc(skus, func(x, y any) int { return cmp.Compare(x.(string), y.(string)) })
	q := "SELECT sku, qty FROM " + g.lq.stock +
		" WHERE sku IN (" + list(len(skus)) + ") ORDER BY sku FOR UPDATE"
	scans := []func(*sql.Rows) error{func(rows *sql.Rows) error {
		var sku string
		var qty int64
		err := rows.Scan(&sku, &qty)
		g.levels[sku] = qty
		return err
	}}
	if g.tx == nil {
		// Whether the batch's orders are recorded already, in the same
		// round trip: a consistent read after the rows are locked.
		var ids []any
		for _, c := range g.calls {
			if c.op == opPlace {
				ids = append(ids, c.order.id)
			}
		}
		if len(ids) > 0 {
			q += "; SELECT id FROM " + g.lq.orders + " WHERE id IN (" + list(len(ids)) + ")"
			skus = append(skus, ids...)
			g.recorded = g.recorded[:0]
			scans = append(scans, func(rows *sql.Rows) error {
				var id string
				err := rows.Scan(&id)
				g.recorded = append(g.recorded, id)
				return err
			})
		}
	}
	err := g.each(ctx, q, skus, scans...)
	if err == nil && len(g.recorded) > 0 {
		return errDuplicate
	}
	return err
}

// decide answers each call in arrival order against the levels read, and
// returns the SKUs on which an order was refused for want of units.
func (g *groupTx) decide() (short []string) {
	have := maps.Clone(g.levels)
	for i := range g.calls {
		c := &g.calls[i]
		c.final, c.answer, c.refused = false, nil, false
		switch c.op {
		case opPlace:
			if sku, err := g.fits(have, c.order.lines); err != nil {
				c.refused, c.answer = true, err
				if g.refused != nil {
					g.refused.mark(sku)
				}
				if errors.Is(err, stockguard.ErrInsufficientStock) && !slices.Contains(short, sku) {
					short = append(short, sku)
				}
				continue
			}
			for _, ln := range c.order.lines {
				have[ln.SKU] -= ln.Qty
			}
		case opConfirm, opReturn:
			rec, ok := g.records[c.order.id]
			switch {
			case !ok:
				c.final, c.answer = true, unknownOrder(c.order.id)
			case rec.kind == kindRestock:
				c.final, c.answer = true, mismatch(c.order.id, rec.kind)
			case rec.state == stockguard.OrderHeld && rec.expired:
				// Its units are due back anyway: the batch gives them back.
				for _, ln := range rec.lines {
					have[ln.SKU] += ln.Qty
				}
				if c.op == opConfirm {
					c.answer = errtext.Closed(c.order.id, stockguard.OrderExpired)
				}
			case c.op == opConfirm && rec.state == stockguard.OrderTaken:
				c.final = true
			case c.op == opConfirm && rec.state == stockguard.OrderHeld:
				// Confirmed by the write, under the row's lock.
			case c.op == opConfirm:
				c.final, c.answer = true, errtext.Closed(c.order.id, rec.state)
			case !rec.state.Open():
				c.final = true // returned or expired: nothing to give back
			default:
				for _, ln := range rec.lines {
					have[ln.SKU] += ln.Qty
				}
			}
		}
	}
	return short
}

// fits reports whether every line fits in have: nil, or the refusal of
// the first line that does not, and its SKU.
func (g *groupTx) fits(have map[string]int64, lines []stockguard.Line) (string, error) {
	for _, ln := range lines {
		left, ok := have[ln.SKU]
		switch {
		case !ok:
			return ln.SKU, unknownSKU(ln.SKU)
		case left < ln.Qty:
			return ln.SKU, insufficient(ln.SKU, ln.Qty, left)
		}
	}
	return "", nil
}

// reclaimShort gives back the expired holds of the short SKUs that have
// any, in the batch's transaction, and returns how many it ended. The
// look-up is a plain read: it locks nothing, so a batch only locks the
// holds it reclaims.
func (g *groupTx) reclaimShort(ctx context.Context, short []string) (int, error) {
	args := make([]any, len(short))
	for i, sku := range short {
		args[i] = sku
	}
	var expired []string
	err := sel(ctx, g.q, &expired, "SELECT DISTINCT sku FROM "+g.lq.lines+" WHERE sku IN ("+list(len(args))+") AND expires <= "+now+" ORDER BY sku", args...)
	if err != nil || len(expired) == 0 {
		return 0, classify(ctx, err, unsent)
	}
	if g.tx == nil {
		return 0, errNeedsTx
	}
	return g.reclaimIn(ctx, g.tx, expired...)
}

// write records the granted orders, moves the states of confirmed,
// returned and expired orders, and changes every SKU row by its net
// change, in as few statements as the calls need.
func (g *groupTx) write(ctx context.Context) error {
	var placed []*orderCall
	var moved []any // id, state pairs
	var cleared []any
	delta := map[string]int64{}
	for i := range g.calls {
		c := &g.calls[i]
		if c.refused {
			continue
		}
		switch c.op {
		case opPlace:
			placed = append(placed, c)
			for _, ln := range c.order.lines {
				delta[ln.SKU] -= ln.Qty
			}
			continue
		}
		rec, ok := g.records[c.order.id]
		if !ok || rec.kind == kindRestock {
			continue
		}
		var to stockguard.OrderState
		switch {
		case rec.state == stockguard.OrderHeld && rec.expired:
			to = stockguard.OrderExpired
		case c.op == opConfirm && rec.state == stockguard.OrderHeld:
			to = stockguard.OrderTaken
		case c.op == opReturn && rec.state.Open():
			to = stockguard.OrderReturned
		default:
			continue
		}
		moved = append(moved, c.order.id, to)
		if rec.state == stockguard.OrderHeld {
			cleared = append(cleared, c.order.id)
		}
		if to != stockguard.OrderTaken {
			for _, ln := range rec.lines {
				delta[ln.SKU] += ln.Qty
			}
		}
	}
	if err := g.insert(ctx, placed); err != nil {
		return err
	}
	if err := g.flush(ctx); err != nil {
		return err
	}
	// The orders' IDs are locked now (see placeAll).
	if !g.seal() {
		return errLeft
	}
	if len(moved) > 0 {
		var b strings.Builder
		ids := make([]any, 0, len(moved)/2)
		b.WriteString("UPDATE " + g.lq.orders + " SET state = CASE id")
		for i := 0; i < len(moved); i += 2 {
			b.WriteString(" WHEN ? THEN ?")
			ids = append(ids, moved[i])
		}
		b.WriteString(" END, changed_at = " + now + " WHERE id IN (" + list(len(ids)) + ")")
		if err := g.exec(ctx, b.String(), append(moved, ids...)...); err != nil {
			return classify(ctx, err, unsent)
		}
	}
	if len(cleared) > 0 {
		if err := g.exec(ctx, "UPDATE "+g.lq.lines+" SET expires = NULL WHERE order_id IN ("+list(len(cleared))+")", cleared...); err != nil {
			return classify(ctx, err, unsent)
		}
	}
	return g.change(ctx, delta)
}

// flush sends, on the multi-statement path, the writes collected so far —
// the INSERTs that record the batch's orders — in a round trip of their
// own, inside the transaction: their IDs are locked once it returns, before
// seal is called and the rest goes with COMMIT.
func (g *groupTx) flush(ctx context.Context) error {
	if g.tx != nil || len(g.pending) == 0 {
		return nil
	}
	_, err := g.q.ExecContext(ctx, inline(strings.Join(g.pending, "; "), g.pendingArgs))
	g.pending, g.pendingArgs = nil, nil
	if isServerError(err, erDupEntry) {
		return errDuplicate
	}
	return classify(ctx, err, unsent)
}

// insert records the orders granted in this batch, IDs in order, as
// placeAll records its orders (recordStmts).
func (g *groupTx) insert(ctx context.Context, placed []*orderCall) error {
	if len(placed) == 0 {
		return nil
	}
	orders := make([]newOrder, len(placed))
	for i, c := range placed {
		orders[i] = c.order
	}
	slices.SortFunc(orders, func(x, y newOrder) int { return cmp.Compare(x.id, y.id) })
	return g.recordStmts(orders).run(ctx, g.exec)
}

// change adds delta to each SKU row in one UPDATE; rows are locked
// already.
func (g *groupTx) change(ctx context.Context, delta map[string]int64) error {
	lines := make([]stockguard.Line, 0, len(delta))
	for sku, d := range delta {
		if d != 0 {
			lines = append(lines, stockguard.Line{SKU: sku, Qty: d})
		}
	}
	if len(lines) == 0 {
		return nil
	}
	slices.SortFunc(lines, func(x, y stockguard.Line) int { return cmp.Compare(x.SKU, y.SKU) })
	cases, args := caseSKU(lines)
	args = slices.Concat(args, args)
	for _, ln := range lines {
		args = append(args, ln.SKU)
	}
	return classify(ctx, g.exec(ctx, "UPDATE "+g.lq.stock+" SET "+moveUnits(cases)+", version = version + 1 WHERE sku IN ("+list(len(lines))+")", args...), unsent)
}

// settleRecorded answers the Take and Hold calls whose ID is recorded from
// their records, for good, and has the batch tried again without them.
func (b *Batched) settleRecorded(ctx context.Context, conn *sqlx.Conn, calls []orderCall) error {
	var ids []any
	for _, c := range calls {
		if c.op == opPlace {
			ids = append(ids, c.order.id)
		}
	}
	var found []string
	if err := sel(ctx, conn, &found, "SELECT id FROM "+b.lq.orders+" WHERE id IN ("+list(len(ids))+")", ids...); err != nil {
		return classify(ctx, err, unsent)
	}
	for i := range calls {
		c := &calls[i]
		c.final, c.answer, c.refused = false, nil, false
		if c.op != opPlace || !slices.Contains(found, c.order.id) {
			continue
		}
		rec, ok, err := b.read(ctx, conn, c.order.id)
		if err != nil {
			return err
		}
		if ok {
			c.final, c.answer = true, resolve(c.order.id, rec, c.order.kind, c.order.lines)
		}
	}
	return strategy.Retry(errDuplicate)
}

// querier is what a batch's statements run on: its transaction, or its
// connection on the multi-statement path.
type querier interface {
	sqlx.QueryerContext
	sqlx.ExecerContext
}

// exec runs a write of the batch, or on the multi-statement path collects
// it for commit. Its error is the driver's, unclassified.
func (g *groupTx) exec(ctx context.Context, query string, args ...any) error {
	if g.tx == nil {
		g.pending = append(g.pending, query)
		g.pendingArgs = append(g.pendingArgs, args...)
		return nil
	}
	_, err := execBound(ctx, g.tx, query, args...)
	return err
}

// each runs query, a read of one or more result sets, as eachRow does,
// scanning the i-th result set with scans[i]; the first read of the
// multi-statement path carries its START TRANSACTION.
func (g *groupTx) each(ctx context.Context, query string, args []any, scans ...func(*sql.Rows) error) error {
	query, g.begin = g.begin+query, ""
	done, err := enter(ctx, phaseRead)
	if err != nil {
		return err
	}
	defer done()
	if g.tx == nil {
		query, args = inline(query, args), nil
	} else {
		query, args = bind(query, args)
	}
	rows, err := g.q.QueryContext(ctx, query, args...)
	if err != nil {
		return classify(ctx, err, unsent)
	}
	defer rows.Close()
	for i, scan := range scans {
		if i > 0 && !rows.NextResultSet() {
			break
		}
		for rows.Next() {
			if err := scan(rows); err != nil {
				return classify(ctx, err, unsent)
			}
		}
	}
	return classify(ctx, rows.Err(), unsent)
}
