// Package examplerun runs a documented Example that needs a server and
// returns what it printed, so that the tests can check the examples the
// docs quote.
package examplerun

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// Stdout runs f and returns what it wrote to os.Stdout.
func Stdout(t testing.TB, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	read := make(chan string)
	go func() {
		var b strings.Builder
		io.Copy(&b, r)
		read <- b.String()
	}()
	defer func() {
		os.Stdout = saved
	}()
	f()
	w.Close()
	out := <-read
	r.Close()
	return out
}

// Execer runs a statement: a *sql.DB, or a *sqlx.DB.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Database creates an empty database through db for an example that
// writes fixed names (an order ID), so that every run starts as empty as
// the first, and drops it when t ends with "DROP DATABASE name" followed
// by dropOptions. It returns the database's name.
func Database(t testing.TB, db Execer, dropOptions string) string {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := "example_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE "+name+dropOptions); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return name
}
