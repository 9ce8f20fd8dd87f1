package tieredtargets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/mysqltargets"
	"github.com/stockguard/stockguard/bench/pgtargets"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/pglock"
	"github.com/stockguard/stockguard/tiered"
)

func init() {
	bench.Register(bench.OrdersTarget(Target("tiered-mysql",
		"Redis orders batched per script call, each with its stream entry; a consumer group applies them to mysqllock.NewBatched", MySQL)))
	pg := Target("tiered-pg",
		"Redis orders batched per script call, each with its stream entry; a consumer group applies them to pglock.NewBatched", Postgres)
	pg.IfReachable = true // in a default run when PostgreSQL can be had, as pg-batched
	bench.Register(bench.OrdersTarget(pg))
	after := target("tiered-mysql-after",
		"tiered-mysql whose consumer starts only at the audit: the Redis front alone while the run is measured", MySQL, true)
	after.OnRequest = true // a measurement of the front, not a deployment
	bench.Register(bench.OrdersTarget(after))
}

// drainTimeout bounds the audit's wait for the backlog to drain.
const drainTimeout = 2 * time.Minute

// Back is a durable back on a SQL backend of the harness.
type Back struct {
	// Backend names the bench backend holding the *sqlx.DB.
	Backend string
	// Create makes the back's tables for the stock table table; Tables
	// names them all, to drop.
	Create func(ctx context.Context, db *sqlx.DB, table string) error
	Tables func(table string) []string
	// Raw is the SELECT of one SKU's level in table, bypassing the back;
	// Quote quotes a table name.
	Raw   func(table string) string
	Quote func(table string) string
	// New builds the back over table, carrying up to batch orders per
	// transaction.
	New func(db *sqlx.DB, table string, batch int) (stockguard.Orders, error)
}

// The backs of the registered targets.
var (
	MySQL = Back{
		Backend: mysqltargets.Name,
		Create: func(ctx context.Context, db *sqlx.DB, table string) error {
			return mysqllock.CreateSchema(ctx, db, mysqllock.WithTable(table))
		},
		Tables: mysqllock.Tables,
		Raw:    func(table string) string { return "SELECT qty FROM `" + table + "` WHERE sku = ?" },
		Quote:  func(table string) string { return "`" + table + "`" },
		New: func(db *sqlx.DB, table string, batch int) (stockguard.Orders, error) {
			return mysqllock.NewBatched(db, mysqllock.WithTable(table), mysqllock.WithBatchSize(batch))
		},
	}
	Postgres = Back{
		Backend: pgtargets.Name,
		Create: func(ctx context.Context, db *sqlx.DB, table string) error {
			return pglock.CreateSchema(ctx, db, pglock.WithTable(table))
		},
		Tables: pglock.Tables,
		Raw:    func(table string) string { return fmt.Sprintf("SELECT qty FROM %q WHERE sku = $1", table) },
		Quote:  func(table string) string { return fmt.Sprintf("%q", table) },
		New: func(db *sqlx.DB, table string, batch int) (stockguard.Orders, error) {
			return pglock.NewBatched(db, pglock.WithTable(table), pglock.WithBatchSize(batch))
		},
	}
)

// Target returns a tiered target over back.
func Target(name, about string, back Back) bench.Target { return target(name, about, back, false) }

// target returns a tiered target over back, its front and consumer built
// with opts besides WithPrefix; late starts its consumer at the first
// reading of the back (the audit's), so that the workers measure the front
// without the consumer and the back competing for the machine.
func target(name, about string, back Back, late bool, opts ...tiered.Option) bench.Target {
	reach := func(ctx context.Context, s bench.Servers, ns string, create bool) (*bench.Store, error) {
		rdb, err := bench.Conn[redis.UniversalClient](s, redistargets.Name)
		if err != nil {
			return nil, err
		}
		db, err := bench.Conn[*sqlx.DB](s, back.Backend)
		if err != nil {
			return nil, err
		}
		table, prefix := "stockbench_"+ns, ns+":"
		topts := append([]tiered.Option{tiered.WithPrefix(prefix)}, opts...)
		st := &bench.Store{
			New: func() (stockguard.Inventory, error) {
				b, err := back.New(db, table, 64)
				if err != nil {
					return nil, err
				}
				return tiered.New(rdb, b, topts...)
			},
		}
		if !late {
			st.Consume = func(ctx context.Context, bc bench.Consumer) (map[string]float64, error) {
				opts := []tiered.Option{tiered.WithPrefix(prefix), tiered.WithConsumerName(bc.Name)}
				if bc.ClaimIdle > 0 {
					opts = append(opts, tiered.WithClaimIdle(bc.ClaimIdle))
				}
				b, err := back.New(db, table, tiered.DefaultBatch)
				if err != nil {
					return nil, err
				}
				c, err := tiered.NewConsumer(rdb, b, opts...)
				if err != nil {
					return nil, err
				}
				if err := c.Run(ctx); err != nil {
					return nil, err
				}
				figs := figures(c.Stats())
				figs["applied_by_"+bc.Name] = figs["back_applied"]
				return figs, nil
			}
		}
		if !create {
			return st, nil
		}
		if err := back.Create(ctx, db, table); err != nil {
			return nil, err
		}
		setup, err := back.New(db, table, 64)
		if err != nil {
			return nil, err
		}
		front, err := tiered.New(rdb, setup, topts...)
		if err != nil {
			return nil, err
		}
		if err := front.Setup(ctx); err != nil {
			return nil, err
		}
		q := tiered.NewStreams(rdb, tiered.StreamKey(prefix), tiered.DefaultGroup)
		// The consumer's back carries a whole batch of entries in one
		// transaction: one fsync for all of them.
		cback, err := back.New(db, table, tiered.DefaultBatch)
		if err != nil {
			return nil, err
		}
		c, err := tiered.NewConsumer(rdb, cback, topts...)
		if err != nil {
			return nil, err
		}
		record, err := back.New(db, table, 64)
		if err != nil {
			return nil, err
		}
		recordFront, err := tiered.New(rdb, record, tiered.WithPrefix(prefix))
		if err != nil {
			return nil, err
		}
		cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		own, stopOwn := context.WithCancel(cctx)
		done := make(chan error, 1)
		consume := sync.OnceFunc(func() { go func() { done <- c.Run(own) }() })
		if !late {
			consume()
		}
		stopConsumer := sync.OnceValue(func() error {
			consume()
			stopOwn()
			return <-done
		})
		var handedOff atomic.Bool // the caller runs the consumers (Consume)
		if st.Consume != nil {
			st.Handoff = func(context.Context) error {
				handedOff.Store(true)
				return stopConsumer()
			}
		}
		var backlog atomic.Int64 // the most entries seen waiting at once
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			sampleBacklog(cctx, rdb, tiered.StreamKey(prefix), &backlog)
		}()
		st.Stats = func() map[string]float64 {
			figs := map[string]float64{"backlog_max": float64(backlog.Load())}
			if !handedOff.Load() {
				// The audit drained the stream, but the consumer counts a
				// batch only after its acknowledgement, which the drain can
				// see first: stopped (Close reports its error), its figures
				// are final.
				_ = stopConsumer()
				maps.Copy(figs, figures(c.Stats()))
			}
			return figs
		}
		raw := back.Raw(table)
		st.Raw = func(ctx context.Context, sku string) (int64, error) {
			consume()
			dctx, cancel := context.WithTimeout(ctx, drainTimeout)
			defer cancel()
			if err := tiered.Drain(dctx, q); err != nil {
				return 0, err
			}
			var v int64
			err := db.QueryRowxContext(ctx, raw, sku).Scan(&v)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, fmt.Errorf("%w: no row for %q", stockguard.ErrUnknownSKU, sku)
			}
			return v, err
		}
		st.Ledger = func(ctx context.Context, skus ...string) (stockguard.Orders, error) {
			consume()
			dctx, cancel := context.WithTimeout(ctx, drainTimeout)
			defer cancel()
			if err := tiered.Drain(dctx, q); err != nil {
				return nil, err
			}
			rep, err := tiered.NewReconciler(recordFront, q).Check(ctx, skus...)
			if err != nil {
				return nil, err
			}
			if len(rep.Drifts) > 0 || len(rep.Backlog) > 0 {
				return nil, fmt.Errorf("%s: the reconciler after draining: drifts %+v, backlog %v", name, rep.Drifts, rep.Backlog)
			}
			return record, nil
		}
		st.Close = func(ctx context.Context) error {
			errs := []error{stopConsumer()}
			stop()
			<-sampled
			for _, t := range back.Tables(table) {
				_, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+back.Quote(t))
				errs = append(errs, err)
			}
			errs = append(errs, deletePrefix(ctx, rdb, prefix))
			return errors.Join(errs...)
		}
		return st, nil
	}
	return bench.Target{
		Name: name, About: about, Needs: []string{redistargets.Name, back.Backend},
		Open: func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
			return reach(ctx, s, ns, true)
		},
		Attach: func(ctx context.Context, s bench.Servers, ns string) (*bench.Store, error) {
			return reach(ctx, s, ns, false)
		},
	}
}

// backlogEvery is how often the backlog is sampled.
const backlogEvery = 50 * time.Millisecond

// sampleBacklog keeps in most the longest the stream has been, read every
// backlogEvery until ctx ends: the stream holds exactly the entries not
// yet applied (the consumer deletes each once the back committed it).
// Failed reads (a fault striking Redis) are skipped.
func sampleBacklog(ctx context.Context, rdb redis.UniversalClient, stream string, most *atomic.Int64) {
	tick := time.NewTicker(backlogEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		n, err := rdb.XLen(rctx, stream).Result()
		cancel()
		if err == nil && n > most.Load() {
			most.Store(n)
		}
	}
}

// figures are a consumer's figures in a Store's Stats: back_applied the
// entries it applied and acknowledged, back_per_s them per second of Steps
// that had work, lag_* from the front's append to the back's commit,
// claimed the redeliveries it took from an idle consumer, deferred the
// entries the back refused for now, front_lost the Steps that found the
// front had lost its data (tiered.ErrFrontLost).
func figures(s tiered.Stats) map[string]float64 {
	busy := 0.0
	if s.Busy > 0 {
		busy = float64(s.Applied) / s.Busy.Seconds()
	}
	return map[string]float64{
		"back_applied": float64(s.Applied), "back_per_s": busy,
		"lag_p50_ms": ms(s.LagP50), "lag_p99_ms": ms(s.LagP99), "lag_max_ms": ms(s.LagMax),
		"claimed": float64(s.Claimed), "deferred": float64(s.Deferred), "front_lost": float64(s.FrontLost),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// deletePrefix removes the keys under prefix (a single Redis: tiered's
// front is never a Cluster).
func deletePrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) == 0 {
		return err
	}
	return rdb.Unlink(ctx, keys...).Err()
}
