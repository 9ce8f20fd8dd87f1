package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/stockguard/stockguard"
)

// Servers holds what the run's backends opened, by backend name: "mysql"
// holds a *sqlx.DB, "redis" a redis.UniversalClient, and so on (each
// backend's package says what). A target takes what its Needs name.
type Servers map[string]any

// Conn returns what backend opened, as a T. Its error wraps
// ErrMissingBackend when s has nothing of that type under that name.
func Conn[T any](s Servers, backend string) (T, error) {
	v, ok := s[backend].(T)
	if !ok {
		return v, fmt.Errorf("%w: %s (want a %T, have %T)", ErrMissingBackend, backend, v, s[backend])
	}
	return v, nil
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
	// Ledger, for a target whose stock of record sits behind the tier that
	// answers, with a queue between them (tiered), waits until the record
	// has every effect acknowledged so far, checks that the tiers agree on
	// skus (its error says how they differ), and returns the record's
	// orders, for an audit to read each acknowledged order from. Nil for a
	// target of one tier.
	Ledger func(ctx context.Context, skus ...string) (stockguard.Orders, error)
	// Stats returns the target's own figures, by name with its unit
	// ("lag_p99_ms"), which the harness's do not cover (tiered's lag from
	// the front's acknowledgement to the back's commit, its backlog); the
	// runner calls it after the audit and puts them in Result.Stats. Nil
	// when it has none.
	Stats func() map[string]float64
	// Consume, for a store with work of its own beside the app instances
	// (tiered: the consumer applying its stream to the back), which a Store
	// from Open runs in its process, runs one more copy of that work in
	// this process until ctx ends, and then returns the copy's figures,
	// named as Stats's (see MergeStats). Copies share the work; one that
	// dies leaves its share to the others (see Consumer). Nil when the
	// store has no such work.
	Consume func(ctx context.Context, c Consumer) (map[string]float64, error)
	// Handoff stops the copy of Consume's work that a Store from Open runs
	// in its process, whose figures then leave Stats: the caller runs the
	// copies, where it chooses (Stock calls it). Set with Consume.
	Handoff func(ctx context.Context) error
}

// Target is a named strategy the harness can run.
type Target struct {
	// Name identifies the target on the command line and in reports.
	Name string
	// About says in a line what the target does (and, for a
	// counterexample, how it breaks).
	About string
	// Needs names the backends (see RegisterBackend) the target runs on,
	// the one holding its stock first.
	Needs []string
	// Counterexample marks a known-broken pattern, kept to prove that the
	// audit catches it. Counterexamples run only when asked for.
	Counterexample bool
	// OnRequest marks a target that runs only when asked for by name: a
	// strategy on another engine of the same protocol (see Variant), whose
	// server a default run should neither need nor start.
	OnRequest bool
	// IfReachable marks a target that a default run (no -strategies)
	// includes only when its backends open: a backend that cannot be had
	// drops such targets with a note instead of failing the run, when every
	// target needing it is so marked. Named with -strategies it must open
	// like any other. For a backend the default run should show when the
	// machine has it (PostgreSQL) without requiring it.
	IfReachable bool
	// Orders marks a target whose instances implement stockguard.Orders:
	// the Checkout workload runs only those (Run refuses an instance that
	// does not), and stockbench plans a checkout — its servers, its time —
	// from this mark, before any server is opened.
	Orders bool
	// OrdersOnly marks a target that differs from another only in how it
	// handles whole orders (a checkout counterexample): it runs only under
	// the Checkout workload.
	OrdersOnly bool
	// Open creates the target's store in namespace ns, a short
	// lower-case alphanumeric string unique to the run, on the servers s
	// (which hold every backend of Needs), and returns it.
	Open func(ctx context.Context, s Servers, ns string) (*Store, error)
	// Attach reaches the store that Open created in namespace ns, from
	// another process, on servers s opened there: it neither creates nor
	// stocks anything, and the Store it returns has a nil Close (the
	// process that opened the store removes it). Nil for a target whose
	// store lives inside one process (an in-memory reference): such a
	// target cannot run split over processes (see Stock and Attach).
	Attach func(ctx context.Context, s Servers, ns string) (*Store, error)
}

// OrdersTarget returns t marked Orders: its instances implement
// stockguard.Orders, so a checkout runs it.
func OrdersTarget(t Target) Target {
	t.Orders = true
	return t
}

// ErrMissingBackend is returned by Run when a target needs a server that
// Servers does not have.
var ErrMissingBackend = errors.New("bench: missing backend")

func (t Target) check(s Servers) error {
	for _, n := range t.Needs {
		if s[n] == nil {
			return fmt.Errorf("%w: %s needs %s", ErrMissingBackend, t.Name, n)
		}
	}
	return nil
}

// needsText joins backend names with "+", "none" for none.
func needsText(needs []string) string {
	if len(needs) == 0 {
		return "none"
	}
	return strings.Join(needs, "+")
}

// newNamespace returns a fresh namespace: "sb" and 12 hex digits, short
// enough for a table name and free of characters that are special in SQL
// identifiers, Redis patterns or hash tags.
func newNamespace() string {
	var b [6]byte
	rand.Read(b[:]) // documented never to return an error
	return "sb" + hex.EncodeToString(b[:])
}
