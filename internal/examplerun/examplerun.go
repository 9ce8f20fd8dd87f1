// Package examplerun runs a documented Example that needs a server and
// returns what it printed, so that the tests can check the examples the
// docs quote.
package examplerun

import (
	"io"
	"os"
	"strings"
	"testing"
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
