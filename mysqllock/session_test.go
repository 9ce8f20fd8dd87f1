package mysqllock

import (
	"testing"

	"github.com/jmoiron/sqlx"
)

// Each connection gets the session setting once, and the record of
// connections the pool has closed since does not grow without bound.
func TestSessionInit_oncePerConnection(t *testing.T) {
	db := testDB(t)
	s := newSessionInit("SET SESSION innodb_lock_wait_timeout = 7")
	s.idle = 0 // entries are pruned at once, not after a minute unused
	const n = 100
	for round := range 2 {
		conns := make([]*sqlx.Conn, n)
		for i := range conns {
			c, err := db.Connx(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			conns[i] = c
			if err := s.apply(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			var v int
			if err := c.GetContext(t.Context(), &v, "SELECT @@SESSION.innodb_lock_wait_timeout"); err != nil || v != 7 {
				t.Fatalf("round %d: session value %d, %v", round, v, err)
			}
		}
		for _, c := range conns {
			c.Close()
		}
		// Close the pooled connections: the next round dials new ones.
		db.SetMaxIdleConns(0)
		db.SetMaxIdleConns(n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.done) > n+n/2 {
		t.Errorf("%d connections remembered after two rounds of %d", len(s.done), n)
	}
}
