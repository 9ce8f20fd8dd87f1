package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
)

// Backends are the servers targets are built on. A field is nil when the
// run needs no such server.
type Backends struct {
	DB    *sqlx.DB
	Redis redis.UniversalClient
	// RedlockMasters are Redis servers independent of Redis and of each
	// other, the other votes of a Redlock quorum (Redis holds the stock
	// and is the first vote).
	RedlockMasters []redis.UniversalClient
}

// RedlockVoters is how many servers, Backends.Redis included, a Redlock
// target locks on: the smallest quorum that survives one server's loss.
const RedlockVoters = 3

// Need says which servers a target uses.
type Need uint8

// The servers a target may need.
const (
	NeedMySQL Need = 1 << iota
	NeedRedis
	NeedRedlock // Redis plus RedlockVoters-1 independent RedlockMasters
)

// String lists the needs: "mysql", "redis", "mysql+redis" or "none".
func (n Need) String() string {
	var parts []string
	if n&NeedMySQL != 0 {
		parts = append(parts, "mysql")
	}
	if n&NeedRedis != 0 {
		parts = append(parts, "redis")
	}
	if n&NeedRedlock != 0 {
		parts = append(parts, "redlock")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// Store is one target's data in one private namespace (a table, a key
// prefix): the means to build app instances over it, to read it without the
// strategy, and to remove it.
type Store struct {
	// New builds one app instance over the store; the runner calls it once
	// per instance, as separate processes would.
	New func() (stockguard.Inventory, error)
	// Raw reads a SKU's stock straight from the backend (a SQL SELECT, a
	// Redis GET), bypassing the strategy, so that the audit does not take
	// the strategy's word for it. Nil when the target has no backend of its
	// own.
	Raw func(ctx context.Context, sku string) (int64, error)
	// Close removes what Open created. Nil when there is nothing to remove.
	Close func(ctx context.Context) error
}

// Target is a named strategy the harness can run.
type Target struct {
	// Name identifies the target on the command line and in reports.
	Name string
	// About says in a line what the target does (and, for a
	// counterexample, how it breaks).
	About string
	Needs Need
	// Counterexample marks a known-broken pattern, kept to prove that the
	// audit catches it. Counterexamples run only when asked for.
	Counterexample bool
	// Open creates the target's store in namespace ns, a short
	// lower-case alphanumeric string unique to the run, and returns it.
	Open func(ctx context.Context, b Backends, ns string) (*Store, error)
}

// Targets returns the registered strategies, in registration order.
func Targets() []Target { return append([]Target(nil), registry...) }

// Counterexamples returns the registered counterexamples.
func Counterexamples() []Target { return append([]Target(nil), counterexamples...) }

// Lookup returns the strategy or counterexample called name.
func Lookup(name string) (Target, bool) {
	for _, list := range [][]Target{registry, counterexamples} {
		for _, t := range list {
			if t.Name == name {
				return t, true
			}
		}
	}
	return Target{}, false
}

// ErrMissingBackend is returned by Run when a target needs a server that
// Backends does not have.
var ErrMissingBackend = errors.New("bench: missing backend")

func (t Target) check(b Backends) error {
	if t.Needs&NeedMySQL != 0 && b.DB == nil {
		return fmt.Errorf("%w: %s needs MySQL", ErrMissingBackend, t.Name)
	}
	if t.Needs&NeedRedis != 0 && b.Redis == nil {
		return fmt.Errorf("%w: %s needs Redis", ErrMissingBackend, t.Name)
	}
	if t.Needs&NeedRedlock != 0 && len(b.RedlockMasters) < RedlockVoters-1 {
		return fmt.Errorf("%w: %s needs %d independent Redis servers besides the stock's", ErrMissingBackend, t.Name, RedlockVoters-1)
	}
	return nil
}

// newNamespace returns a fresh namespace: "sb" and 12 hex digits, short
// enough for a table name and free of characters that are special in SQL
// identifiers, Redis patterns or hash tags.
func newNamespace() string {
	var b [6]byte
	rand.Read(b[:]) // documented never to return an error
	return "sb" + hex.EncodeToString(b[:])
}
