package tiered

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/pglock"
	"github.com/stockguard/stockguard/strategy"
)

// gatedPool is a pool whose connections go through a gate, and the local
// ports of those connections (the server names a session by its client's
// host and port).
type gatedPool struct {
	gate *netgate.Gate
	db   *sqlx.DB

	mu    sync.Mutex
	ports []string
}

func (g *gatedPool) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := g.gate.Dial(ctx, network, addr)
	if err == nil {
		_, port, _ := net.SplitHostPort(c.LocalAddr().String())
		g.mu.Lock()
		g.ports = append(g.ports, port)
		g.mu.Unlock()
	}
	return c, err
}

// settled waits until open, a query of the number of transactions open
// among sessions whose client port is in the list it is given, answers 0
// on check: whatever the gate held has reached the server and ended there.
func (g *gatedPool) settled(t *testing.T, check *sqlx.DB, open func(ports string) string) {
	t.Helper()
	g.mu.Lock()
	ports := strings.Join(g.ports, ", ")
	g.mu.Unlock()
	if ports == "" {
		return
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := check.GetContext(t.Context(), &n, open(ports)); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions of the gated pool still open", n)
		}
	}
}

// lateBack is a back of the late-COMMIT test: the rig's back, and the
// slow consumer's, on the same table through a gated pool.
type lateBack struct {
	name  string
	setUp func(t *testing.T) (table string, back, slow stockguard.Orders, g *gatedPool, settled func())
}

var lateBacks = []lateBack{
	{"mysql", func(t *testing.T) (string, stockguard.Orders, stockguard.Orders, *gatedPool, func()) {
		db := backendstest.DB(t, multi)
		table := newTable(t, db)
		g := &gatedPool{gate: netgate.New(t)}
		name := "gated-" + hex.EncodeToString([]byte(t.Name()))[:40]
		mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) { return g.dial(ctx, "tcp", addr) })
		g.db = backendstest.DB(t, multi, func(c *mysql.Config) { c.Net = name })
		return table, must.New(mysqllock.NewBatched(db, mysqllock.WithTable(table))), must.New(mysqllock.NewBatched(g.db, mysqllock.WithTable(table))), g, func() {
			g.settled(t, db, func(ports string) string {
				return "SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id " +
					"WHERE SUBSTRING_INDEX(p.HOST, ':', -1) IN (" + ports + ")"
			})
		}
	}},
	{"postgres", func(t *testing.T) (string, stockguard.Orders, stockguard.Orders, *gatedPool, func()) {
		db := backendstest.Postgres(t)
		var b [4]byte
		rand.Read(b[:])
		table := "tiered_" + hex.EncodeToString(b[:])
		if err := pglock.CreateSchema(t.Context(), db, pglock.WithTable(table)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for _, n := range pglock.Tables(table) {
				if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS "`+n+`"`); err != nil {
					t.Errorf("drop %s: %v", n, err)
				}
			}
		})
		g := &gatedPool{gate: netgate.New(t)}
		cfg, err := pgx.ParseConfig(backendstest.SharedPostgres(t).DSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DialFunc = g.dial
		g.db = sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx")
		t.Cleanup(func() { g.db.Close() })
		return table, must.New(pglock.NewBatched(db, pglock.WithTable(table))), must.New(pglock.NewBatched(g.db, pglock.WithTable(table))), g, func() {
			g.settled(t, db, func(ports string) string {
				return "SELECT COUNT(*) FROM pg_stat_activity WHERE client_port IN (" + ports + ") AND xact_start IS NOT NULL"
			})
		}
	}},
}

// releasingBack is a back that calls release when Recover moves its fence,
// and otherwise is back.
type releasingBack struct {
	stockguard.Orders
	release func()
}

func (b *releasingBack) Fenced(name string, epoch int64) strategy.FencedOrders {
	return b.Orders.(strategy.Fencer).Fenced(name, epoch)
}

func (b *releasingBack) AdvanceFence(ctx context.Context, name string) (int64, error) {
	b.release()
	return b.Orders.(strategy.Fencer).AdvanceFence(ctx, name)
}

// holdCommit matches a write carrying a COMMIT (MySQL's driver sends it
// in capitals, pgx in lower case).
func holdCommit(p []byte) bool { return bytes.Contains(bytes.ToLower(p), []byte("commit")) }

// A consumer of a lost front whose COMMIT is held on its way to the back
// (the lease is the client's clock: the network can deliver a transaction's
// COMMIT after it) while Recover runs: once the COMMIT has landed, the
// front's level plus held units is the back's level, or Recover said it
// could not tell (an error, the front still refused, and a second Recover
// agrees). The gate opens when Recover moves the back's fence, or else
// when Recover has returned.
func TestRecover_lateCommitOfALostConsumer_tiersAgree(t *testing.T) {
	for _, lb := range lateBacks {
		t.Run(lb.name, func(t *testing.T) {
			ctx := t.Context()
			table, back, slowBack, g, settled := lb.setUp(t)
			r := newLostRigOn(t, table, back)
			stock(t, r.o, 10, "a")
			if err := r.o.Take(ctx, "acked-1", line("a", 3)); err != nil {
				t.Fatal(err)
			}
			slow := must.New(NewConsumer(r.srv.Client(), slowBack, WithPrefix("shop:"), WithConsumerName("slow"), WithApplyLease(lostLease)))
			g.gate.HoldWhen(holdCommit)
			stepped := make(chan error, 1)
			go func() { _, err := slow.Step(ctx); stepped <- err }()
			<-g.gate.Blocked() // the batch's COMMIT is on its way to the back
			r.restart(t)

			var once sync.Once
			release := func() { once.Do(g.gate.Release) }
			rdb := r.srv.Client()
			t.Cleanup(func() { rdb.Close() })
			rec := must.New(New(rdb, &releasingBack{Orders: r.back, release: release}, WithPrefix("shop:"), WithApplyLease(lostLease)))
			recovered := rec.Recover(ctx, []string{"a"}, nil)
			release()
			<-stepped
			settled()
			if recovered != nil {
				t.Logf("Recover = %v; again, the COMMIT landed", recovered)
				if err := rec.Recover(ctx, []string{"a"}, nil); err != nil {
					t.Fatalf("Recover again = %v", err)
				}
			}
			r.o = rec
			r.agree(t, r.c, "a")
		})
	}
}

// A Consumer whose epoch's number is not the back's fence (here: a front
// armed by Setup, number 0, over a back whose fence moved on) changes
// nothing on the back: its Step ends with ErrFrontLost (strategy.ErrFenced),
// and the entries it had are dropped and counted.
func TestConsumer_backFencedPastItsEpoch_changesNothing(t *testing.T) {
	ctx := t.Context()
	r := newRig(t)
	stock(t, r.o, 10, "a")
	if err := r.o.Take(ctx, "o1", line("a", 3)); err != nil {
		t.Fatal(err)
	}
	if n, err := r.back.(strategy.Fencer).AdvanceFence(ctx, StreamKey(r.prefix)); err != nil || n != 1 {
		t.Fatalf("AdvanceFence = %d, %v", n, err)
	}
	c := r.consumer(nil)
	if _, err := c.Step(ctx); !errors.Is(err, ErrFrontLost) || !errors.Is(err, strategy.ErrFenced) {
		t.Errorf("Step = %v, want ErrFrontLost and strategy.ErrFenced", err)
	}
	if s := c.Stats(); s.FrontLost != 1 || s.Dropped != 1 || s.Applied != 0 {
		t.Errorf("consumer stats %+v: want the entry dropped, the loss counted, nothing applied", s)
	}
	if _, err := r.back.Order(ctx, "o1"); !errors.Is(err, stockguard.ErrUnknownOrder) {
		t.Errorf("back: Order(o1) = %v, want ErrUnknownOrder: the fenced consumer wrote nothing", err)
	}
	wantStock(t, "back", r.back, "a", 10)
}
