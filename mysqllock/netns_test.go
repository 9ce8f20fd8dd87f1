package mysqllock

import (
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/netns"
)

// The kernel-retransmission case on MariaDB (root only,
// STOCKGUARD_NETNS=1; scripts/soak.sh netns), on both pool kinds:
// Atomic's order sent over a link that drops every packet past its
// caller's deadline, refused on repeat, then retransmitted by the kernel
// when the link heals, through a forwarder in a network namespace. It
// must not be recorded.
func TestAtomic_netnsRetransmission(t *testing.T) {
	for _, p := range []struct {
		name string
		edit func(*mysql.Config)
	}{{"interpolateParams", interpolate}, {"multiStatements", multi}} {
		t.Run(p.name, func(t *testing.T) {
			ns := netns.New(t)
			fwd := ns.Forward(t, backendstest.SharedMySQL(t).Config().Addr)
			linked := testDB(t, p.edit, func(c *mysql.Config) { c.Addr = fwd.Addr })
			linked.SetMaxOpenConns(1)
			db := testDB(t, p.edit)
			table := newTable(t, db)
			ns.RefusedRepeat(t, must.New(NewAtomic(linked, WithTable(table))), must.New(NewAtomic(db, WithTable(table))), fwd.Open)
		})
	}
}
