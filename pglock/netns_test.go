package pglock

import (
	"net"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netns"
)

// The kernel-retransmission case on PostgreSQL (root only,
// STOCKGUARD_NETNS=1; scripts/soak.sh netns): Atomic's one-line order
// sent over a link that drops every packet past its caller's deadline,
// refused on repeat, then retransmitted by the kernel when the link
// heals, through a forwarder in a network namespace. It must not be
// recorded.
func TestAtomic_netnsRetransmission(t *testing.T) {
	ns := netns.New(t)
	cfg, err := pgx.ParseConfig(backendstest.SharedPostgres(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	fwd := ns.Forward(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	host, port, err := net.SplitHostPort(fwd.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	cfg.Host, cfg.Port = host, uint16(p)
	linked := sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx")
	linked.SetMaxOpenConns(1)
	t.Cleanup(func() { linked.Close() })
	db := testDB(t)
	table := newTable(t, db)
	ns.RefusedRepeat(t, must.New(NewAtomic(linked, WithTable(table))), must.New(NewAtomic(db, WithTable(table))), fwd.Open)
}
