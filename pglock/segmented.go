package pglock

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"

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

// Segmented splits each SKU's stock over several rows (SegmentsTable), so
// that buyers of one hot SKU do not all queue on one row lock. A request
// takes from the first segment, starting at a random one, that is not
// locked and holds enough — one statement, autocommit:
//
//	UPDATE stock_segments s SET qty = s.qty - $1
//	FROM (SELECT seg FROM stock_segments WHERE sku = $2 AND qty >= $1
//	      ORDER BY seg < $3, seg LIMIT 1 FOR UPDATE SKIP LOCKED) p
//	WHERE s.sku = $2 AND s.seg = p.seg RETURNING s.qty
//
// SKIP LOCKED passes over the segments other buyers are writing instead of
// queueing behind them. When it finds none — every segment that fits is
// busy, or none fits alone — the request queues on the lock of the segment
// it started at, with the same conditional UPDATE; when that one is short,
// one transaction locks all the SKU's segments in key order (waiting, at
// most the lock timeout), takes the units across them, or refuses when
// their total is short. So it never reports a false
// sold-out: it refuses only when the locked rows hold fewer than qty units
// in total. The package's other strategies do not read the segments table.
// Segmented is safe for concurrent use and with other instances.
type Segmented struct {
	store   // validation and connections; the stock itself is in the segments table
	n       int
	q       segQueries
	session *sessionInit
	retrier *strategy.Retrier
}

var (
	_ stockguard.Inventory  = (*Segmented)(nil)
	_ strategy.RetryCounter = (*Segmented)(nil)
)

// segQueries are the statements of one segments table.
type segQueries struct {
	take    string // qty, sku, start seg → qty left in the segment taken from
	lockAll string // sku → seg, qty, locked in key order
	takeOne string // qty, sku, seg: the conditional decrement of one segment, waiting for its lock
	takeSeg string // qty, sku, seg
	trim    string // sku, n: deletes segments n and up
	fill    string // sku, qty, n: spreads qty over segments 0…n-1
}

// NewSegmented returns the segmented strategy over db's table (options
// read: WithTable, WithSegments, WithLockTimeout, WithRetry). Each pooled
// connection it uses gets SET lock_timeout once; don't change that setting
// on the same pool.
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
	st.q.stock = "SELECT SUM(qty)::bigint FROM " + t + " WHERE sku = $1 GROUP BY sku"
	return &Segmented{
		store: st,
		n:     o.segments,
		q: segQueries{
			take: "UPDATE " + t + " s SET qty = s.qty - $1 FROM (SELECT seg FROM " + t +
				" WHERE sku = $2 AND qty >= $1 ORDER BY seg < $3, seg LIMIT 1 FOR UPDATE SKIP LOCKED) p" +
				" WHERE s.sku = $2 AND s.seg = p.seg AND s.qty >= $1 RETURNING s.qty",
			lockAll: "SELECT seg, qty FROM " + t + " WHERE sku = $1 ORDER BY seg FOR UPDATE",
			takeOne: "UPDATE " + t + " SET qty = qty - $1 WHERE sku = $2 AND seg = $3 AND qty >= $1",
			takeSeg: "UPDATE " + t + " SET qty = qty - $1 WHERE sku = $2 AND seg = $3",
			trim:    "DELETE FROM " + t + " WHERE sku = $1 AND seg >= $2",
			fill: "INSERT INTO " + t + " AS s (sku, seg, qty) SELECT $1, g, $2::bigint / $3 + (g < $2::bigint % $3)::int " +
				"FROM generate_series(0, $3 - 1) g ON CONFLICT (sku, seg) DO UPDATE SET qty = EXCLUDED.qty",
		},
		session: lockTimeoutSession(o.lockWait),
		retrier: strategy.NewRetrier(o.retryPolicy(strategy.RetryPolicy{})),
	}
}

// Retries returns how many times a request was tried again after a
// deadlock.
func (s *Segmented) Retries() int64 { return s.retrier.Retries() }

// SetStock spreads qty units of sku evenly over the segments (the first
// qty mod n get one more), replacing whatever rows sku had, in one
// transaction. It returns as the other strategies' SetStock does.
func (s *Segmented) SetStock(ctx context.Context, sku string, qty int64) error {
	if err := s.check(ctx, strategy.ValidateSet(sku, qty)); err != nil {
		return err
	}
	return s.retrier.Do(ctx, func(ctx context.Context) error {
		return s.pinned(ctx, s.session, func(conn *sqlx.Conn) error {
			return inTx(ctx, conn, nil, func(tx *sqlx.Tx) error {
				if _, err := tx.ExecContext(ctx, s.q.trim, sku, s.n); err != nil {
					return classify(ctx, err, unsent)
				}
				_, err := tx.ExecContext(ctx, s.q.fill, sku, qty, s.n)
				return classify(ctx, err, unsent)
			})
		})
	})
}

// Decrement takes qty units of sku, all or none, from one free segment
// that holds enough, else across all of them under their locks. It returns
// nil or an error wrapping one of stockguard.ErrInsufficientStock,
// ErrUnknownSKU, ErrInvalidRequest, ErrContention (the segments stayed
// busy past the lock timeout, or deadlock retries ran out: nothing
// changed), ErrUnavailable (nothing changed), ErrOutcomeUnknown (the
// connection failed after a write was sent), or the context's error
// (nothing changed).
func (s *Segmented) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := s.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return s.retrier.Do(ctx, func(ctx context.Context) error {
		start := rand.IntN(s.n)
		var left int64
		err := s.db.QueryRowContext(ctx, s.q.take, qty, sku, start).Scan(&left)
		if !errors.Is(err, sql.ErrNoRows) {
			return classify(ctx, err, sent)
		}
		// Every segment that fits is busy — more buyers than segments — or
		// none fits alone. Queue on one, as a single-row strategy would, so
		// that the buyers spread over the segments' locks; only a segment
		// that turns out short sends the request to the sweep, which locks
		// them all.
		res, err := s.db.ExecContext(ctx, s.q.takeOne, qty, sku, start)
		if err != nil {
			return classify(ctx, err, sent)
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return classify(ctx, err, sent)
		}
		return s.pinned(ctx, s.session, func(conn *sqlx.Conn) error {
			return inTx(ctx, conn, nil, func(tx *sqlx.Tx) error { return s.sweep(ctx, tx, sku, qty) })
		})
	})
}

// sweep locks every segment of sku in key order and takes qty across them,
// the fullest first, so that few rows are written.
func (s *Segmented) sweep(ctx context.Context, tx *sqlx.Tx, sku string, qty int64) error {
	type segment struct{ seg, qty int64 }
	var segs []segment
	var total int64
	err := eachRow(ctx, tx, s.q.lockAll, []any{sku}, func(rows *sql.Rows) error {
		var sg segment
		err := rows.Scan(&sg.seg, &sg.qty)
		segs = append(segs, sg)
		total += sg.qty
		return err
	})
	switch {
	case err != nil:
		return err
	case len(segs) == 0:
		return unknownSKU(sku)
	case total < qty:
		return insufficient(sku, qty, total)
	}
	for need := qty; need > 0; {
		best := 0
		for i, sg := range segs {
			if sg.qty > segs[best].qty {
				best = i
			}
		}
		take := min(need, segs[best].qty)
		if _, err := tx.ExecContext(ctx, s.q.takeSeg, take, sku, segs[best].seg); err != nil {
			return classify(ctx, err, unsent)
		}
		segs[best].qty -= take
		need -= take
	}
	return nil
}
