package pglock

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
)

// No connection setting may turn a SKU or an order ID into SQL. pgx binds
// arguments through the extended protocol, and where a DSN asks it to
// splice them (the simple protocol) it doubles quotes and refuses
// standard_conforming_strings=off — no backslash to swallow. The client
// encodings whose second byte of a character can be 0x5c (SJIS, BIG5,
// GBK) are converted by the server before it parses, so an escaped quote
// cannot end a literal. Under UTF8 every call treats the hostile strings
// as strings; under another encoding — where the server would convert
// them into other strings, and pgx refuses the simple protocol only once
// a statement is on its way — every call fails with ErrUnavailable. The
// victim never changes.
func TestCharset_noConnectionSettingTurnsAStringIntoSQL(t *testing.T) {
	check := testDB(t)
	dsn := backendstest.SharedPostgres(t).DSN
	for _, enc := range []string{"UTF8", "SJIS", "BIG5", "GBK"} {
		for _, mode := range []string{"cache_statement", "exec", "simple_protocol"} {
			t.Run(enc+"/"+mode, func(t *testing.T) {
				db, err := sqlx.Open("pgx", dsn+"&client_encoding="+enc+"&default_query_exec_mode="+mode)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				db.SetMaxOpenConns(8)
				hostileStrings(t, check, db, enc == "UTF8")
			})
		}
	}
}

// hostileStrings runs every strategy on db with SKUs and order IDs that,
// spliced into a statement with a swallowed escape, would set or take the
// victim's stock. plain says every call must succeed; else every call
// must fail with ErrUnavailable.
func hostileStrings(t *testing.T, check, db *sqlx.DB, plain bool) {
	ctx := t.Context()
	var b [4]byte
	rand.Read(b[:])
	table := "cs_" + hex.EncodeToString(b[:])
	if err := CreateSchema(ctx, check, WithTable(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range Tables(table) {
			check.Exec("DROP TABLE IF EXISTS " + quote(n))
		}
	})
	if err := must.New(NewAtomic(check, WithTable(table))).SetStock(ctx, "victim", 5); err != nil {
		t.Fatal(err)
	}
	where := "中' OR sku='victim'--"
	stmt := "中'; UPDATE " + table + " SET qty=424242--"
	outcome := func(what string, err error) {
		t.Helper()
		if plain && err != nil || !plain && !errors.Is(err, stockguard.ErrUnavailable) {
			t.Errorf("%s: %v", what, err)
		}
	}
	opts := []Option{WithTable(table)}
	for name, inv := range strategies(db, opts...) {
		for _, sku := range []string{where, stmt} {
			outcome(name+" SetStock", inv.SetStock(ctx, sku, 3))
			outcome(name+" Decrement", inv.Decrement(ctx, sku, 1))
			n, err := inv.Stock(ctx, sku)
			outcome(name+" Stock", err)
			if err == nil && n != 2 {
				t.Errorf("%s: Stock(%q) = %d, want 2", name, sku, n)
			}
		}
	}
	seg, err := NewSegmented(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	outcome("segmented SetStock", seg.SetStock(ctx, where, 3))
	outcome("segmented Decrement", seg.Decrement(ctx, where, 1))
	for name, o := range orderStrategies(db, opts...) {
		outcome(name+" SetStock", o.SetStock(ctx, stmt, 10))
		for _, id := range []string{where, stmt} {
			id += name
			outcome(name+" Take", o.Take(ctx, id, line(stmt, 1)))
			_, err := o.Order(ctx, id)
			outcome(name+" Order", err)
			outcome(name+" Restock", o.Restock(ctx, "r"+id, stmt, 1))
		}
	}
	var n int64
	if err := check.GetContext(ctx, &n, "SELECT qty FROM "+quote(table)+" WHERE sku = 'victim'"); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("victim's stock is %d, want 5: a hostile string ran as SQL", n)
	}
}
