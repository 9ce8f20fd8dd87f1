package pglock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/strategy"
)

func TestMain(m *testing.M) { backendstest.Main(m) }

// testDB opens a pool on the shared server.
func testDB(t testing.TB) *sqlx.DB {
	t.Helper()
	return backendstest.Postgres(t)
}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// newTable creates the tables of a stock table of its own for t, dropped
// when t ends.
func newTable(t testing.TB, db *sqlx.DB) string {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := nonIdent.ReplaceAllString(t.Name(), "_")
	name = "t_" + name[:min(len(name), 30)] + "_" + hex.EncodeToString(b[:])
	if err := CreateSchema(t.Context(), db, WithTable(name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, n := range Tables(name) {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+quote(n)); err != nil {
				t.Errorf("drop %s: %v", n, err)
			}
		}
	})
	return name
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
