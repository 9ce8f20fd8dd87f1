package tiered

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netgate"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/strategy"
)

// gatedMySQL is a pool on the shared MySQL whose connections go through a
// gate, and the local ports of those connections (the server's
// PROCESSLIST names them by host:port).
type gatedMySQL struct {
	gate *netgate.Gate
	db   *sqlx.DB

	mu    sync.Mutex
	ports []string
}

func newGatedMySQL(t *testing.T) *gatedMySQL {
	t.Helper()
	g := &gatedMySQL{gate: netgate.New(t)}
	name := "gated-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := g.gate.Dial(ctx, "tcp", addr)
		if err == nil {
			_, port, _ := net.SplitHostPort(c.LocalAddr().String())
			g.mu.Lock()
			g.ports = append(g.ports, port)
			g.mu.Unlock()
		}
		return c, err
	})
	g.db = backendstest.DB(t, multi, func(c *mysql.Config) { c.Net = name })
	return g
}

// settled waits until no connection of g has a transaction open on the
// server: whatever the gate held has reached the server and ended there.
func (g *gatedMySQL) settled(t *testing.T, db *sqlx.DB) {
	t.Helper()
	g.mu.Lock()
	ports := append([]string(nil), g.ports...)
	g.mu.Unlock()
	if len(ports) == 0 {
		return
	}
	q := "SELECT COUNT(*) FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id " +
		"WHERE SUBSTRING_INDEX(p.HOST, ':', -1) IN ('" + strings.Join(ports, "', '") + "')"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var open int
		if err := db.GetContext(t.Context(), &open, q); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions of the gated pool still open", open)
		}
	}
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

// holdCommit matches a write carrying a COMMIT.
func holdCommit(p []byte) bool { return bytes.Contains(p, []byte("COMMIT")) }

// A consumer of a lost front whose COMMIT is held on its way to the back
// (the lease is the client's clock: the network can deliver a transaction's
// COMMIT after it) while Recover runs: once the COMMIT has landed, the
// front's level plus held units is the back's level, or Recover said it
// could not tell (an error, the front still refused, and a second Recover
// agrees).
func TestRecover_lateCommitOfALostConsumer_tiersAgree(t *testing.T) {
	ctx := t.Context()
	r := newLostRig(t)
	stock(t, r.o, 10, "a")
	if err := r.o.Take(ctx, "acked-1", line("a", 3)); err != nil {
		t.Fatal(err)
	}
	g := newGatedMySQL(t)
	slowBack := must.New(mysqllock.NewBatched(g.db, mysqllock.WithTable(r.table)))
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
	g.settled(t, backendstest.DB(t))
	if recovered != nil {
		t.Logf("Recover = %v; again, the COMMIT landed", recovered)
		if err := rec.Recover(ctx, []string{"a"}, nil); err != nil {
			t.Fatalf("Recover again = %v", err)
		}
	}
	r.o = rec
	r.agree(t, r.c, "a")
}
