package mysqllock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/strategy"
)

func TestMain(m *testing.M) {
	// Tests kill connections on purpose; the driver would log each one.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	backendstest.Main(m)
}

// testDB opens a pool on the shared server. Tests use the driver's default
// settings unless they say otherwise, so they pass on an unprepared DSN.
func testDB(t testing.TB, edit ...func(*mysql.Config)) *sqlx.DB {
	t.Helper()
	return backendstest.DB(t, edit...)
}

func interpolate(c *mysql.Config) { c.InterpolateParams = true }

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// newTable creates a stock table of its own for t, dropped when t ends.
func newTable(t testing.TB, db *sqlx.DB) string {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := nonIdent.ReplaceAllString(t.Name(), "_")
	name = "t_" + name[:min(len(name), 36)] + "_" + hex.EncodeToString(b[:])
	if err := CreateSchema(t.Context(), db, WithTable(name)); err != nil {
		t.Fatal(err)
	}
	for _, n := range Tables(name) {
		dropAtCleanup(t, db, n)
	}
	return name
}

// dropAtCleanup drops table name when t ends.
func dropAtCleanup(t testing.TB, db *sqlx.DB, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+quote(name)); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
}

// mustSet stocks sku through a FencedStore (any strategy would do).
func mustSet(t testing.TB, db *sqlx.DB, table, sku string, qty int64) {
	t.Helper()
	if err := must.New(NewFencedStore(db, WithTable(table))).SetStock(t.Context(), sku, qty); err != nil {
		t.Fatalf("SetStock(%q, %d): %v", sku, qty, err)
	}
}

// level reads sku's qty and version straight from the table.
func level(t testing.TB, db *sqlx.DB, table, sku string) (qty, version int64) {
	t.Helper()
	err := db.QueryRowxContext(context.WithoutCancel(t.Context()), "SELECT qty, version FROM "+quote(table)+" WHERE sku = ?", sku).Scan(&qty, &version)
	if err != nil {
		t.Fatalf("read %q: %v", sku, err)
	}
	return qty, version
}

// holdRow starts a transaction on its own connection that locks sku's row
// with lock ("FOR UPDATE" or "LOCK IN SHARE MODE"). The caller commits or
// rolls back; cleanup rolls back whatever is left.
func holdRow(t testing.TB, db *sqlx.DB, table, sku, lock string) *sqlx.Tx {
	t.Helper()
	tx, err := db.BeginTxx(context.WithoutCancel(t.Context()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	var qty int64
	if err := tx.QueryRowx("SELECT qty FROM "+quote(table)+" WHERE sku = ? "+lock, sku).Scan(&qty); err != nil {
		t.Fatalf("lock %q: %v", sku, err)
	}
	return tx
}

// waitingOn polls the process list until a statement starting with prefix
// waits for a row lock, and returns its connection id.
func waitingOn(t testing.TB, db *sqlx.DB, prefix string) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		// InnoDB refreshes its information_schema tables only when they have
		// not been read for 100ms: a read sooner than that — also the first
		// one of a call that follows another call — sees a frozen picture,
		// which may still show a statement that has since stopped waiting.
		time.Sleep(120 * time.Millisecond)
		var ids []int64
		err := db.SelectContext(t.Context(), &ids, `SELECT p.ID FROM information_schema.PROCESSLIST p
			JOIN information_schema.INNODB_TRX x ON x.trx_mysql_thread_id = p.ID
			WHERE x.trx_state = 'LOCK WAIT' AND p.INFO LIKE ?`, strings.ReplaceAll(prefix, "_", `\_`)+"%")
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 1 {
			return ids[0]
		}
	}
	var procs []string
	db.SelectContext(t.Context(), &procs, `SELECT CONCAT_WS(' | ', p.ID, p.COMMAND, p.STATE, p.INFO, x.trx_state, x.trx_id) FROM information_schema.PROCESSLIST p
		LEFT JOIN information_schema.INNODB_TRX x ON x.trx_mysql_thread_id = p.ID`)
	var trx []string
	db.SelectContext(t.Context(), &trx, `SELECT CONCAT_WS(' | ', trx_id, trx_state, trx_mysql_thread_id) FROM information_schema.INNODB_TRX`)
	procs = append(procs, trx...)
	t.Fatalf("no statement %q waiting for a lock; process list:\n%s", prefix, strings.Join(procs, "\n"))
	return 0
}

// contractOne fails t unless err satisfies exactly one contract error, and
// that one is want.
func contractOne(t testing.TB, err, want error) {
	t.Helper()
	var hits []error
	for _, e := range strategy.ContractErrors() {
		if errors.Is(err, e) {
			hits = append(hits, e)
		}
	}
	if len(hits) != 1 || hits[0] != want {
		t.Fatalf("got %v (matches %v), want exactly %v", err, hits, want)
	}
}

// strategies builds every Inventory strategy of the package on one table.
func strategies(db *sqlx.DB, opts ...Option) map[string]stockguard.Inventory {
	return map[string]stockguard.Inventory{
		"atomic":      must.New(NewAtomic(db, opts...)),
		"pessimistic": must.New(NewPessimistic(db, opts...)),
		"optimistic":  must.New(NewOptimistic(db, opts...)),
		"namedlock":   must.New(NewNamedLock(db, opts...)),
	}
}

var strategyNames = []string{"atomic", "pessimistic", "optimistic", "namedlock"}
