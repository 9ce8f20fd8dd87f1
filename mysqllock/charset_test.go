package mysqllock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/must"
)

// No connection setting may turn a SKU, an order ID or a lock name into
// SQL. With interpolateParams the driver escapes a quote as \' — and in a
// charset whose second byte of a character can be 0x5c (gbk, big5, sjis,
// cp932) the valid UTF-8 string 中' (E4 B8 AD 27) becomes E4 B8 AD 5C 27,
// which the server reads as two characters and a closing quote: the rest
// of the string runs as SQL. Every strategy either treats the hostile
// strings as plain strings or refuses the pool with ErrUnavailable before
// sending one; the victim SKU never changes.
func TestCharset_noConnectionSettingTurnsAStringIntoSQL(t *testing.T) {
	backendsShared := testDB(t) // reads the victim with the driver's defaults
	pools := []struct {
		name string
		edit func(*mysql.Config)
		// interpolates: the driver splices arguments into the statement
		interpolates bool
	}{
		{"prepared", func(*mysql.Config) {}, false},
		{"interpolateParams", interpolate, true},
		{"multiStatements", multi, true},
	}
	for _, charset := range []string{"utf8mb4", "latin1", "gbk", "big5", "sjis", "cp932"} {
		for _, pool := range pools {
			for _, noBackslash := range []bool{false, true} {
				name := charset + "/" + pool.name
				if noBackslash {
					name += "/NO_BACKSLASH_ESCAPES"
				}
				t.Run(name, func(t *testing.T) {
					db := testDB(t, pool.edit, func(c *mysql.Config) {
						c.Params = map[string]string{"charset": charset}
						if noBackslash {
							c.Params["sql_mode"] = "'NO_BACKSLASH_ESCAPES'"
						}
					})
					db.SetMaxOpenConns(8)
					// Unsafe: the driver escapes with a backslash that the
					// charset can swallow into a character.
					unsafe := pool.interpolates && !noBackslash && charset != "utf8mb4" && charset != "latin1"
					hostileStrings(t, backendsShared, db, unsafe)
				})
			}
		}
	}
}

// hostileStrings runs every strategy on db with SKUs and order IDs that,
// spliced into a statement under a charset that swallows the escaping
// backslash, would set or take another SKU's stock. unsafe says whether
// db's settings do that: then every call must be refused with
// ErrUnavailable, else every call must treat the strings as strings.
func hostileStrings(t *testing.T, check, db *sqlx.DB, unsafe bool) {
	ctx := t.Context()
	var b [4]byte
	rand.Read(b[:])
	table := "cs_" + hex.EncodeToString(b[:]) // short: the payloads must fit 64 bytes
	if err := CreateSchema(ctx, check, WithTable(table)); err != nil {
		t.Fatal(err)
	}
	for _, n := range Tables(table) {
		dropAtCleanup(t, check, n)
	}
	mustSet(t, check, table, "victim", 5)
	// Without multiStatements: a WHERE clause that also matches the victim.
	where := "中' OR sku=0x76696374696d#"
	// With multiStatements: a statement of its own.
	stmt := "中'; UPDATE " + table + " SET qty=424242#"

	outcome := func(what string, err error, plain error) {
		t.Helper()
		switch {
		case unsafe && !errors.Is(err, stockguard.ErrUnavailable):
			t.Errorf("%s: %v, want the pool refused with ErrUnavailable", what, err)
		case !unsafe && !errors.Is(err, plain) && !(plain == nil && err == nil):
			t.Errorf("%s: %v, want %v", what, err, plain)
		}
	}
	opts := []Option{WithTable(table)}
	inventories := map[string]stockguard.Inventory{
		"atomic":      must.New(NewAtomic(db, opts...)),
		"pessimistic": must.New(NewPessimistic(db, opts...)),
		"optimistic":  must.New(NewOptimistic(db, opts...)),
		"namedlock":   must.New(NewNamedLock(db, opts...)),
		"segmented":   must.New(NewSegmented(db, opts...)),
		"batched":     must.New(NewBatched(db, opts...)),
	}
	for name, inv := range inventories {
		for _, sku := range []string{where, stmt} {
			outcome(name+" SetStock", inv.SetStock(ctx, sku, 3), nil)
			outcome(name+" Decrement", inv.Decrement(ctx, sku, 1), nil)
			n, err := inv.Stock(ctx, sku)
			outcome(name+" Stock", err, nil)
			if !unsafe && n != 2 {
				t.Errorf("%s: Stock(%q) = %d, want 2", name, sku, n)
			}
		}
		outcome(name+" Decrement of a SKU never stocked", inv.Decrement(ctx, where+"x", 1), stockguard.ErrUnknownSKU)
	}
	fenced, err := NewFencedStore(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	outcome("fenced WriteFenced", fenced.WriteFenced(ctx, where, 7, 1), nil)
	outcome("fenced WriteFenced", fenced.WriteFenced(ctx, stmt, 7, 1), nil)

	for name, o := range map[string]stockguard.Orders{"atomic": must.New(NewAtomic(db, opts...)), "batched": must.New(NewBatched(db, opts...))} {
		outcome(name+" SetStock", o.SetStock(ctx, where, 10), nil)
		outcome(name+" SetStock", o.SetStock(ctx, stmt, 10), nil)
		for _, id := range []string{where, stmt} {
			id += name // distinct per strategy; still after the payload
			outcome(name+" Take", o.Take(ctx, id, line(where, 1), line(stmt, 1)), nil)
			outcome(name+" Take again", o.Take(ctx, id, line(where, 1), line(stmt, 1)), nil)
			_, err := o.Order(ctx, id)
			outcome(name+" Order", err, nil)
			outcome(name+" Hold", o.Hold(ctx, "h"+id, stockguard.MaxHoldTTL, line(stmt, 1)), nil)
			outcome(name+" Confirm", o.Confirm(ctx, "h"+id), nil)
			outcome(name+" Restock", o.Restock(ctx, "r"+id, where, 1), nil)
		}
	}
	if n, _ := level(t, check, table, "victim"); n != 5 {
		t.Fatalf("victim's stock is %d, want 5: a hostile string ran as SQL", n)
	}
}

// A connection's character set may change after the store first used the
// pool — under its feet: a SET NAMES gbk run by other code on a pooled
// connection, or init_connect handing the pool's new connections gbk once
// ConnMaxLifetime has renewed them. No hostile string may run as SQL
// then either: the victim SKU never changes.
func TestCharset_aCharsetChangedAfterFirstUseNeverTurnsAStringIntoSQL(t *testing.T) {
	check := testDB(t)
	t.Run("SET NAMES on a pooled connection", func(t *testing.T) {
		for _, pool := range []struct {
			name string
			edit func(*mysql.Config)
		}{{"interpolateParams", interpolate}, {"multiStatements", multi}} {
			t.Run(pool.name, func(t *testing.T) {
				db := testDB(t, pool.edit)
				db.SetMaxOpenConns(1) // every request on the connection set below
				afterFirstUse(t, check, db, func() {
					if _, err := db.Exec("SET NAMES gbk"); err != nil {
						t.Fatal(err)
					}
				})
			})
		}
	})
	t.Run("init_connect and ConnMaxLifetime", func(t *testing.T) {
		// init_connect runs for users without SUPER (MySQL) or CONNECTION
		// ADMIN (MariaDB) only: one with the table privileges alone.
		const user = "cs_plain"
		for _, q := range []string{
			"CREATE USER IF NOT EXISTS '" + user + "'@'%'",
			"GRANT SELECT, INSERT, UPDATE, DELETE ON *.* TO '" + user + "'@'%'",
		} {
			if _, err := check.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { check.ExecContext(context.WithoutCancel(t.Context()), "DROP USER '"+user+"'@'%'") })
		for _, pool := range []struct {
			name string
			edit func(*mysql.Config)
		}{{"interpolateParams", interpolate}, {"multiStatements", multi}} {
			t.Run(pool.name, func(t *testing.T) {
				db := testDB(t, pool.edit, func(c *mysql.Config) { c.User, c.Passwd = user, "" })
				afterFirstUse(t, check, db, func() {
					if _, err := check.Exec("SET GLOBAL init_connect = 'SET NAMES gbk'"); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { check.ExecContext(context.WithoutCancel(t.Context()), "SET GLOBAL init_connect = ''") })
					// Every connection is past its lifetime: the pool opens new ones.
					db.SetConnMaxLifetime(time.Nanosecond)
					var cs string
					if err := db.Get(&cs, "SELECT @@character_set_client"); err != nil || cs != "gbk" {
						t.Fatalf("a new connection's character set: %q, %v; want gbk", cs, err)
					}
				})
			})
		}
	})
}

// afterFirstUse has every strategy (but those named in without) serve a
// plain SKU on db, then runs change, then sends the hostile strings
// through every strategy: the
// victim's stock must stay as it was. The calls' own answers are not
// checked: strings read back under the changed character set may not
// match the ones sent.
func afterFirstUse(t *testing.T, check, db *sqlx.DB, change func(), without ...string) {
	ctx := t.Context()
	var b [4]byte
	rand.Read(b[:])
	table := "cs_" + hex.EncodeToString(b[:])
	if err := CreateSchema(ctx, check, WithTable(table)); err != nil {
		t.Fatal(err)
	}
	for _, n := range Tables(table) {
		dropAtCleanup(t, check, n)
	}
	mustSet(t, check, table, "victim", 5)
	mustSet(t, check, table, "plain", 100)
	where := "中' OR sku=0x76696374696d#"
	stmt := "中'; UPDATE " + table + " SET qty=424242#"
	opts := []Option{WithTable(table)}
	inventories := map[string]stockguard.Inventory{
		"atomic":      must.New(NewAtomic(db, opts...)),
		"pessimistic": must.New(NewPessimistic(db, opts...)),
		"optimistic":  must.New(NewOptimistic(db, opts...)),
		"namedlock":   must.New(NewNamedLock(db, opts...)),
		"segmented":   must.New(NewSegmented(db, opts...)),
		"batched":     must.New(NewBatched(db, opts...)),
	}
	orders := map[string]stockguard.Orders{"atomic": must.New(NewAtomic(db, opts...)), "batched": must.New(NewBatched(db, opts...))}
	for _, name := range without {
		delete(inventories, name)
	}
	for name, inv := range inventories {
		want(t, name+" SetStock plain", inv.SetStock(ctx, "plain-"+name, 10), nil)
		want(t, name+" Decrement plain", inv.Decrement(ctx, "plain-"+name, 1), nil)
	}
	for name, o := range orders {
		want(t, name+" Take plain", o.Take(ctx, "plain-"+name, line("plain", 1)), nil)
	}
	change()
	for _, inv := range inventories {
		for _, sku := range []string{where, stmt} {
			inv.SetStock(ctx, sku, 3)
			inv.Decrement(ctx, sku, 1)
			inv.Stock(ctx, sku)
		}
	}
	for name, o := range orders {
		for _, id := range []string{where, stmt} {
			id += name
			o.Take(ctx, id, line(where, 1), line(stmt, 1))
			o.Hold(ctx, "h"+id, stockguard.MaxHoldTTL, line(stmt, 1), line(where, 1))
			o.Confirm(ctx, "h"+id)
			o.Restock(ctx, "r"+id, where, 1)
		}
	}
	if n, _ := level(t, check, table, "victim"); n != 5 {
		t.Fatalf("victim's stock is %d, want 5: a hostile string ran as SQL", n)
	}
}

// TiDB's row of TestCharset_aCharsetChangedAfterFirstUseNeverTurnsAStringIntoSQL:
// SET NAMES gbk on a pooled connection after the store first used it.
func TestTiDB_aCharsetChangedAfterFirstUseNeverTurnsAStringIntoSQL(t *testing.T) {
	db := tidbDB(t)
	db.SetMaxOpenConns(1) // every request on the connection set below
	afterFirstUse(t, db, db, func() {
		if _, err := db.Exec("SET NAMES gbk"); err != nil {
			t.Fatal(err)
		}
	}, "namedlock") // not on TiDB
}
