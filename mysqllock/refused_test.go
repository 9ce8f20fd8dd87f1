package mysqllock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stockguard/stockguard"
)

// On a multi-statement pool a transaction's statements and its COMMIT go
// in one round trip, and the server stops at the first statement that
// fails: a refusal before COMMIT — here a user without the right to
// change the stock table (1142), as a read-only or demoted primary (1290,
// 1792, 1836) or a full table (1114) refuse — changed nothing, and is
// ErrUnavailable, as on the statement-by-statement path, not
// ErrOutcomeUnknown.
func TestOrders_refusalBeforeCommitIsUnavailable(t *testing.T) {
	root := testDB(t)
	table := newTable(t, root)
	mustSet(t, root, table, "a", 10)
	var b [4]byte
	rand.Read(b[:])
	user := "nostock_" + hex.EncodeToString(b[:])
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw'", user),
		fmt.Sprintf("GRANT SELECT ON test.* TO '%s'@'%%'", user),
		fmt.Sprintf("GRANT INSERT, UPDATE, DELETE ON test.%s TO '%s'@'%%'", quote(OrdersTable(table)), user),
		fmt.Sprintf("GRANT INSERT, UPDATE, DELETE ON test.%s TO '%s'@'%%'", quote(OrderLinesTable(table)), user),
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { root.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	refusedBeforeCommitAs(t, table, user)
	if n, _ := level(t, root, table, "a"); n != 10 {
		t.Fatalf("%d units left, want 10", n)
	}
}

// A read-only server (read_only, as a demoted primary runs) refuses a user
// without the privilege to bypass it (1290): ErrUnavailable on both pool
// kinds, nothing changed.
func TestOrders_readOnlyServerIsUnavailable(t *testing.T) {
	root := testDB(t)
	table := newTable(t, root)
	mustSet(t, root, table, "a", 10)
	var b [4]byte
	rand.Read(b[:])
	user := "writer_" + hex.EncodeToString(b[:])
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw'", user),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON test.* TO '%s'@'%%'", user),
		"SET GLOBAL read_only = 1",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		root.Exec("SET GLOBAL read_only = 0")
		root.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user))
	})
	refusedBeforeCommitAs(t, table, user)
	if n, _ := level(t, root, table, "a"); n != 10 {
		t.Fatalf("%d units left, want 10", n)
	}
}

// refusedBeforeCommitAs places orders on table as user, whom the server
// refuses every write: each is ErrUnavailable.
func refusedBeforeCommitAs(t *testing.T, table, user string) {
	for _, pool := range []struct {
		name string
		edit func(*mysql.Config)
	}{{"statements", interpolate}, {"multiStatements", multi}} {
		t.Run(pool.name, func(t *testing.T) {
			db := testDB(t, pool.edit, func(c *mysql.Config) { c.User, c.Passwd = user, "pw" })
			for _, name := range orderStrategyNames {
				t.Run(name, func(t *testing.T) {
					o := orderStrategies(db, WithTable(table))[name]
					want(t, "Take", o.Take(t.Context(), pool.name+name, line("a", 1)), stockguard.ErrUnavailable)
					want(t, "Hold", o.Hold(t.Context(), "h"+pool.name+name, stockguard.MaxHoldTTL, line("a", 1)), stockguard.ErrUnavailable)
				})
			}
		})
	}
}
