package mysqllock

import (
	"context"
	"hash/maphash"
	"math/rand/v2"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// DefaultSegments is NewSegmented's default number of rows per SKU.
const DefaultSegments = 8

// WithSegments sets how many rows NewSegmented's SetStock spreads a SKU's
// stock over, 1–1024. More segments let more buyers of one SKU write at
// once; fewer keep the last units of a SKU together, where requests that
// fit no single segment have to lock them all. Instances with different
// counts may share a table: Decrement works with whatever rows a SKU has.
// Default DefaultSegments (8).
func WithSegments(n int) Option {
	return func(o *options) {
		o.given |= optSegments
		if o.within("segment count", n, 1, 1024) {
			o.segments = n
		}
	}
}

// SegmentsTable returns the name of the table NewSegmented keeps the stock
// of table in: table + "_segments".
func SegmentsTable(table string) string { return table + "_segments" }

// createSegments creates NewSegmented's table, SegmentsTable(table),
// unless it exists. sku is binary for the reasons CreateSchema gives:
//
//	sku VARBINARY(64), seg INT, PRIMARY KEY (sku, seg)
//	qty BIGINT NOT NULL     units left in this segment
func createSegments(ctx context.Context, db sqlx.ExecerContext, table string) error {
	return createTable(ctx, db, SegmentsTable(table), `
	sku VARBINARY(64) NOT NULL,
	seg INT NOT NULL,
	qty BIGINT NOT NULL,
	PRIMARY KEY (sku, seg),
	CHECK (qty BETWEEN 0 AND 9007199254740991)
`)
}

// Segmented splits each SKU's stock over several rows (seed 002's segmented
// stock), so that buyers of one hot SKU do not all queue on one row lock.
// A request first tries one segment — an instance hands out each SKU's
// segments as tokens, one request per segment at a time, in an order that
// starts at random — with a conditional UPDATE that needs no transaction:
//
//	UPDATE stock_segments SET qty = qty - ? WHERE sku = ? AND seg = ? AND qty >= ?
//
// When that segment is short it reads every segment (one consistent
// snapshot, no locks) and tries one that fits; when none fits but their
// total does, or the one it tried was taken meanwhile, it locks all the
// SKU's segments (SELECT … FOR UPDATE, always in key order, so two such
// requests never deadlock), takes the units across them, and commits.
//
// So it never reports a false sold-out: it refuses only when a snapshot or
// the locked rows show fewer than qty units in total. The stock lives in
// its own table (SegmentsTable, created by CreateSchema), which the
// package's other strategies do not read. Segmented is safe for concurrent
// use and with other instances.
type Segmented struct {
	store   // validation and connections; the stock itself is in the segments table
	n       int
	q       segQueries
	session *sessionInit
	retrier *strategy.Retrier
	seed    maphash.Seed
	tokens  []chan int // see Decrement
}

var (
	_ stockguard.Inventory  = (*Segmented)(nil)
	_ strategy.RetryCounter = (*Segmented)(nil)
)

// segQueries are the statements of one segments table.
type segQueries struct {
	table   string // quoted
	take    string // qty, sku, seg, qty: the conditional decrement of one segment
	read    string // sku → seg, qty
	lockAll string // sku → seg, qty, locked
	clear   string // sku
	fill    string // (sku, seg, qty) × n
}

// NewSegmented returns the segmented strategy over db's table (options
// read: WithTable, WithSegments, WithLockWaitTimeout, WithRetry). Each
// pooled connection it uses gets SET SESSION innodb_lock_wait_timeout once
// (WithLockWaitTimeout); don't change that variable on the same pool. See
// NewAtomic for the DSN settings that matter.
func NewSegmented(db *sqlx.DB, opts ...Option) (*Segmented, error) {
	o, err := build("NewSegmented", db, readsSegmented, opts)
	if err != nil {
		return nil, err
	}
	return newSegmented(db, o), nil
}

// newSegmented builds what NewSegmented returns, from valid options.
func newSegmented(db *sqlx.DB, o options) *Segmented {
	t := quote(SegmentsTable(o.table))
	st := newStore(db, o)
	// The shared Stock then sums the segments in one consistent read; no
	// segments, no row: ErrUnknownSKU.
	st.q.stock = "SELECT SUM(qty) FROM " + t + " WHERE sku = ? GROUP BY sku"
	return &Segmented{
		store: st,
		n:     o.segments,
		q: segQueries{
			table:   t,
			take:    "UPDATE " + t + " SET qty = qty - ? WHERE sku = ? AND seg = ? AND qty >= ?",
			read:    "SELECT seg, qty FROM " + t + " WHERE sku = ?",
			lockAll: "SELECT seg, qty FROM " + t + " WHERE sku = ? ORDER BY seg FOR UPDATE",
			clear:   "DELETE FROM " + t + " WHERE sku = ?",
			fill:    "INSERT INTO " + t + " (sku, seg, qty) VALUES " + placeholders("(?, ?, ?)", o.segments),
		},
		session: lockWaitSession(o.lockWait),
		retrier: strategy.NewRetrier(o.retryPolicy(strategy.RetryPolicy{})),
		seed:    maphash.MakeSeed(),
		tokens:  newTokens(o.segments),
	}
}

// tokenStripes is how many token pools an instance has; the SKUs that
// hash to one share it.
const tokenStripes = 64

// newTokens returns the token pools of an instance, each holding the
// segment numbers 0…n-1 in a random order.
func newTokens(n int) []chan int {
	pools := make([]chan int, tokenStripes)
	for i := range pools {
		pools[i] = make(chan int, n)
		for _, seg := range rand.Perm(n) {
			pools[i] <- seg
		}
	}
	return pools
}

// placeholders repeats tuple n times, comma-separated.
func placeholders(tuple string, n int) string {
	return strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ")
}

// Retries returns how many times a request was tried again after a
// deadlock.
func (s *Segmented) Retries() int64 { return s.retrier.Retries() }

// SetStock creates sku with qty units, or overwrites its level, spread as
// evenly as integers allow over the configured number of segments (the
// first qty mod n segments get one unit more), in one transaction that
// replaces whatever segments sku had. It returns nil, or an error wrapping
// stockguard.ErrInvalidRequest, ErrContention (rows busy: nothing
// changed), ErrUnavailable (the server refused — a missing segments table,
// read-only — or no connection: nothing changed), ErrOutcomeUnknown (COMMIT
// was sent but its reply was lost) or the context's error.
func (s *Segmented) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := s.check(ctx, strategy.ValidateSet(sku, qty)); err != nil {
		return err
	}
	args := make([]any, 0, 3*s.n)
	for i := range s.n {
		share := qty / int64(s.n)
		if int64(i) < qty%int64(s.n) {
			share++
		}
		args = append(args, sku, i, share)
	}
	return s.retrier.Do(ctx, func(ctx context.Context) error {
		return s.pinned(ctx, s.session, func(ctx context.Context, conn *sqlx.Conn) error {
			return inTx(ctx, conn, func(tx *sqlx.Tx) error {
				_, err := execBound(ctx, tx, s.q.clear, sku)
				if err == nil {
					_, err = execBound(ctx, tx, s.q.fill, args...)
				}
				return classify(ctx, err, unsent)
			})
		})
	})
}

// Decrement takes qty units of sku, all or none, from one segment or,
// when no single one holds enough, from several. It returns nil or an
// error wrapping one of stockguard.ErrInsufficientStock (fewer than qty
// units in all segments together), ErrUnknownSKU, ErrInvalidRequest,
// ErrContention (a row stayed busy past the lock-wait timeout, or deadlock
// retries ran out: nothing changed), ErrUnavailable (the server refused,
// or no connection: nothing changed), ErrOutcomeUnknown (the connection failed after an UPDATE or
// COMMIT was sent), or the context's error (nothing changed).
func (s *Segmented) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := s.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	// A request first takes a segment token of its SKU's pool, waiting in
	// line when all are out, and tries that segment first. So at most one
	// request of this instance works on a segment row at a time, and the
	// others wait here, in arrival order, at the cost of a channel
	// operation, instead of in InnoDB's row-lock queue, where each wait
	// costs the server a thread switch: that keeps the throughput at 64
	// buyers where it is at 8. Other instances' requests still meet on the
	// row locks, which alone keep the stock right.
	tokens := s.tokens[maphash.String(s.seed, sku)%tokenStripes]
	var seg int
	select {
	case seg = <-tokens:
	case <-ctx.Done():
		return strategy.Canceled(ctx)
	}
	defer func() { tokens <- seg }()
	return s.retrier.Do(ctx, func(ctx context.Context) error {
		return s.pinned(ctx, s.session, func(ctx context.Context, conn *sqlx.Conn) error {
			return s.take(ctx, conn, sku, seg, qty)
		})
	})
}

// segment is one row of a SKU.
type segment struct {
	Seg int   `db:"seg"`
	Qty int64 `db:"qty"`
}

func (s *Segmented) take(ctx context.Context, conn *sqlx.Conn, sku string, seg int, qty int64) error {
	if done, err := s.takeFrom(ctx, conn, sku, seg, qty); done || err != nil {
		return err
	}
	// A snapshot is a consistent picture of every segment at one moment:
	// if it holds too few units in total, the SKU had too few then.
	var segs []segment
	if err := sel(ctx, conn, &segs, s.q.read, sku); err != nil {
		return classify(ctx, err, unsent)
	}
	var total int64
	var fits []int
	for _, sg := range segs {
		total += sg.Qty
		if sg.Qty >= qty {
			fits = append(fits, sg.Seg)
		}
	}
	switch {
	case len(segs) == 0:
		return unknownSKU(sku)
	case total < qty:
		return insufficient(sku, qty, total)
	case len(fits) > 0:
		// Random among the fitting ones, so that the buyers who missed do
		// not all converge on one row.
		if done, err := s.takeFrom(ctx, conn, sku, fits[rand.IntN(len(fits))], qty); done || err != nil {
			return err
		}
	}
	return s.spread(ctx, conn, sku, qty)
}

// takeFrom takes qty units from one segment if it holds them.
func (s *Segmented) takeFrom(ctx context.Context, conn *sqlx.Conn, sku string, seg int, qty int64) (bool, error) {
	res, err := exec(ctx, conn, s.q.take, qty, sku, seg, qty)
	if err != nil {
		return false, classify(ctx, err, sent)
	}
	// qty ≥ 1, so a matched row is a changed row, with or without
	// clientFoundRows.
	n, err := res.RowsAffected()
	return n == 1, classify(ctx, err, sent)
}

// spread locks all of sku's segments and takes qty units across them,
// starting at a random one, with one UPDATE.
func (s *Segmented) spread(ctx context.Context, conn *sqlx.Conn, sku string, qty int64) error {
	return inTx(ctx, conn, func(tx *sqlx.Tx) error {
		var segs []segment
		if err := sel(ctx, tx, &segs, s.q.lockAll, sku); err != nil {
			return classify(ctx, err, unsent)
		}
		var total int64
		for _, sg := range segs {
			total += sg.Qty
		}
		switch {
		case len(segs) == 0:
			return unknownSKU(sku)
		case total < qty:
			return insufficient(sku, qty, total)
		}
		var cases strings.Builder
		var args, in []any
		start, need := rand.IntN(len(segs)), qty
		for i := 0; need > 0; i++ {
			sg := segs[(start+i)%len(segs)]
			if part := min(need, sg.Qty); part > 0 {
				cases.WriteString(" WHEN ? THEN ?")
				args = append(args, sg.Seg, part)
				in = append(in, sg.Seg)
				need -= part
			}
		}
		args = append(append(args, sku), in...)
		_, err := exec(ctx, tx, "UPDATE "+s.q.table+" SET qty = qty - CASE seg"+cases.String()+
			" END WHERE sku = ? AND seg IN ("+placeholders("?", len(in))+")", args...)
		return classify(ctx, err, unsent)
	})
}
