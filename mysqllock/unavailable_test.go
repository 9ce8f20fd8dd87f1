package mysqllock

import (
	"context"
	"database/sql"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/must"
)

// every returns one instance of every Inventory strategy of the package
// (FencedStore is not one; callers test it apart).
func every(db *sqlx.DB, opts ...Option) map[string]stockguard.Inventory {
	inv := strategies(db, opts...)
	inv["pessimistic-nowait"] = must.New(NewPessimistic(db, append(opts, WithLockMode(LockNoWait))...))
	inv["pessimistic-skiplocked"] = must.New(NewPessimistic(db, append(opts, WithLockMode(LockSkipLocked))...))
	inv["segmented"] = must.New(NewSegmented(db, opts...))
	inv["batched"] = must.New(NewBatched(db, opts...))
	return inv
}

// calls are the calls of every strategy that a backend which cannot serve
// must answer ErrUnavailable, nothing applied.
func unavailableCalls(t *testing.T, db *sqlx.DB, opts ...Option) map[string]func(context.Context) error {
	calls := map[string]func(context.Context) error{}
	for name, inv := range every(db, opts...) {
		calls[name+"/Decrement"] = func(ctx context.Context) error { return inv.Decrement(ctx, "u", 1) }
		calls[name+"/SetStock"] = func(ctx context.Context) error { return inv.SetStock(ctx, "u", 5) }
		calls[name+"/Stock"] = func(ctx context.Context) error { _, err := inv.Stock(ctx, "u"); return err }
	}
	f, err := NewFencedStore(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	calls["fenced/WriteFenced"] = func(ctx context.Context) error { return f.WriteFenced(ctx, "u", 5, 1) }
	return calls
}

// A table that does not exist is a backend that cannot serve, not a busy
// one; and nothing creates it.
func TestUnavailable_missingTable(t *testing.T) {
	db := testDB(t, interpolate)
	const table = "t_never_created_unavailable"
	for name, call := range unavailableCalls(t, db, WithTable(table)) {
		t.Run(name, func(t *testing.T) {
			contractOne(t, call(t.Context()), stockguard.ErrUnavailable)
		})
	}
	for _, tb := range []string{table, SegmentsTable(table)} {
		var n int
		if err := db.GetContext(t.Context(), &n, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", tb); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("table %s was created", tb)
		}
	}
}

// Segmented keeps its stock in a table of its own: the stock table alone
// is not enough (issue 13: "contention, gave up: Error 1146").
func TestSegmented_missingSegmentsTable(t *testing.T) {
	db := testDB(t, interpolate)
	table := newTable(t, db)
	// CreateSchema made every table of the package: take one away.
	if _, err := db.Exec("DROP TABLE " + quote(SegmentsTable(table))); err != nil {
		t.Fatal(err)
	}
	s, err := NewSegmented(db, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	contractOne(t, s.SetStock(t.Context(), "u", 5), stockguard.ErrUnavailable)
	contractOne(t, s.Decrement(t.Context(), "u", 1), stockguard.ErrUnavailable)
}

// Nothing listens on the port: unavailable, at once, for every call.
func TestUnavailable_unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", addr, "test"
	cfg.Timeout = 2 * time.Second
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for name, call := range unavailableCalls(t, db) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			contractOne(t, call(ctx), stockguard.ErrUnavailable)
		})
	}
	// Without a deadline the request is not supervised: the same answer.
	contractOne(t, must.New(NewAtomic(db)).Decrement(context.Background(), "u", 1), stockguard.ErrUnavailable)
}

// A read-only server refuses every write (1290): unavailable, nothing
// changed, while reads go on. read_only is global, so this runs on a
// private server only.
func TestUnavailable_readOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	srv, err := backends.StartLocalMySQL(ctx)
	if err != nil {
		noServer(t, err)
	}
	t.Cleanup(func() { srv.Close() })
	root := openCfg(t, srv.Config())
	const table = "ro_stock"
	exec := func(stmt string, args ...any) {
		t.Helper()
		if _, err := root.ExecContext(t.Context(), stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := CreateSchema(t.Context(), root, WithTable(table)); err != nil {
		t.Fatal(err)
	}
	if err := CreateSchema(t.Context(), root, WithTable(table)); err != nil {
		t.Fatal(err)
	}
	if err := must.New(NewAtomic(root, WithTable(table))).SetStock(t.Context(), "u", 10); err != nil {
		t.Fatal(err)
	}
	if err := must.New(NewSegmented(root, WithTable(table))).SetStock(t.Context(), "u", 10); err != nil {
		t.Fatal(err)
	}
	// root may write to a read-only server (READ_ONLY ADMIN); a plain
	// application user may not.
	exec("CREATE USER 'app'@'127.0.0.1'")
	exec("GRANT SELECT, INSERT, UPDATE, DELETE ON test.* TO 'app'@'127.0.0.1'")
	exec("SET GLOBAL read_only = 1")
	cfg := srv.Config()
	cfg.User, cfg.InterpolateParams = "app", true
	app := openCfg(t, cfg)
	for name, inv := range every(app, WithTable(table)) {
		t.Run(name, func(t *testing.T) {
			contractOne(t, inv.Decrement(t.Context(), "u", 1), stockguard.ErrUnavailable)
			contractOne(t, inv.SetStock(t.Context(), "u", 3), stockguard.ErrUnavailable)
			if got, err := inv.Stock(t.Context(), "u"); err != nil || got != 10 {
				t.Errorf("Stock = %d, %v; want 10 (nothing changed, reads served)", got, err)
			}
		})
	}
	contractOne(t, must.New(NewFencedStore(app, WithTable(table))).WriteFenced(t.Context(), "u", 3, 1), stockguard.ErrUnavailable)
	var qty int64
	if err := root.GetContext(t.Context(), &qty, "SELECT qty FROM "+quote(table)+" WHERE sku = 'u'"); err != nil || qty != 10 {
		t.Errorf("qty %d, %v; want 10", qty, err)
	}
}

func openCfg(t *testing.T, cfg *mysql.Config) *sqlx.DB {
	t.Helper()
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	t.Cleanup(func() { db.Close() })
	return db
}

// noServer skips t for want of a private server, or fails it when
// backends are required.
func noServer(t *testing.T, err error) {
	t.Helper()
	if v := os.Getenv(backends.EnvRequire); v != "" && v != "0" {
		t.Fatalf("private MariaDB: %v", err)
	}
	t.Skipf("private MariaDB: %v (set %s=1 to make this a failure)", err, backends.EnvRequire)
}
