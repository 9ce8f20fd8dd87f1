package mysqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// NamedLock decrements under a MySQL named lock, on one pinned connection:
//
//	SELECT GET_LOCK(name, timeout)
//	SELECT qty, version FROM stock WHERE sku = ?
//	-- check qty in Go
//	UPDATE stock SET qty = ?, version = version + 1 WHERE sku = ? AND version = ?
//	SELECT RELEASE_LOCK(name)
//
// The lock serialises the buyers of one SKU across processes, the row is
// not locked between read and write. The write still checks the version,
// so a writer that bypasses the lock (another strategy on the same table)
// causes a retry, not a lost update. It is safe for concurrent use and with
// other instances.
//
// A named lock belongs to a session, is reentrant within it, and is freed
// when the session ends. So the connection that holds it never goes back to
// the pool still holding it: when RELEASE_LOCK does not confirm the release
// (the context ended mid-statement and the driver closed the socket, the
// server failed, the body released it itself), the connection is discarded
// and its server thread killed, which frees the lock at once rather than
// when the server notices the closed socket.
type NamedLock struct {
	store
	table   string
	timeout time.Duration
	retrier *strategy.Retrier
	dbName  atomic.Pointer[string] // DATABASE() of the pool, read once
}

var (
	_ stockguard.Inventory  = (*NamedLock)(nil)
	_ strategy.RetryCounter = (*NamedLock)(nil)
)

// releaseTimeout bounds the RELEASE_LOCK (and the KILL after a failed one),
// which run even when the caller's context has ended.
const releaseTimeout = 5 * time.Second

// NewNamedLock returns the GET_LOCK strategy over db's table (options read:
// WithTable, WithNamedLockTimeout, WithRetry, WithEngine). It does not run
// on TiDB (errNamedLockTiDB): with WithEngine(EngineTiDB) every method
// returns an error wrapping stockguard.ErrUnavailable before any I/O;
// with the engine detected, from the first use on. Lock names are
// "stockguard:" and 40 hex digits of SHA-256(database, table, sku), within
// MySQL's 64-character limit for every valid SKU and distinct across tables
// and databases of one server. See NewAtomic for the DSN settings that
// matter; each request holds a connection for its whole duration.
func NewNamedLock(db *sqlx.DB, opts ...Option) (*NamedLock, error) {
	o, err := build("NewNamedLock", db, readsNamedLock, opts)
	if err != nil {
		return nil, err
	}
	return newNamedLock(db, o), nil
}

// newNamedLock builds what NewNamedLock returns, from valid options.
func newNamedLock(db *sqlx.DB, o options) *NamedLock {
	n := &NamedLock{
		store:   newStore(db, o),
		table:   o.table,
		timeout: o.lockTimeout,
		retrier: strategy.NewRetrier(o.retryPolicy(strategy.RetryPolicy{})),
	}
	n.engine.supports = func(e Engine) error {
		if e == EngineTiDB {
			return errNamedLockTiDB
		}
		return nil
	}
	if o.engine == EngineTiDB {
		n.refused = fmt.Errorf("%w: mysqllock: %w", stockguard.ErrUnavailable, errNamedLockTiDB)
	}
	return n
}

// errNamedLockTiDB is why NewNamedLock refuses TiDB. Measured:
// 22 ops/s, and a bare context deadline error to callers whose own
// deadline was seconds away — TiDB's GET_LOCK is a pessimistic transaction
// on an internal table, not a session lock the strategy's contract holds
// for.
var errNamedLockTiDB = errors.New("NewNamedLock does not run on TiDB (its GET_LOCK is a transaction on an internal table, slow and outside the error contract): use NewAtomic or NewPessimistic")

// Retries returns how many times a request was tried again: after a
// deadlock, or a version conflict with a writer that bypassed the lock.
func (n *NamedLock) Retries() int64 { return n.retrier.Retries() }

// Decrement takes qty units of sku, all or none. It returns nil or an error
// wrapping one of stockguard.ErrInsufficientStock, ErrUnknownSKU,
// ErrInvalidRequest, ErrContention (the lock was not obtained within the
// lock timeout, or retries ran out: nothing changed), ErrUnavailable (the
// server refused, no connection, or TiDB: nothing changed),
// ErrOutcomeUnknown (the connection failed after the UPDATE was sent), or
// the context's error (nothing changed; also when the caller's deadline
// ended a wait for the lock).
func (n *NamedLock) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := n.check(ctx, strategy.Validate(sku, qty)); err != nil {
		return err
	}
	return n.retrier.Do(ctx, func(ctx context.Context) error {
		return n.hold(ctx, sku, func(ctx context.Context, conn *sqlx.Conn) error {
			return n.swap(ctx, conn, sku, qty)
		})
	})
}

// WithLock runs fn while holding sku's named lock — the one Decrement takes
// — and returns fn's error. fn gets the connection that holds the lock;
// statements on other connections are not covered by it. The lock is
// released however fn ends, panics included (the panic goes on).
//
// It returns fn's error, or before calling fn an error wrapping
// stockguard.ErrInvalidRequest, ErrContention (not obtained within the
// timeout), ErrUnavailable (the server refused, or no connection) or the
// context's error.
func (n *NamedLock) WithLock(ctx context.Context, sku string, fn func(ctx context.Context, conn *sqlx.Conn) error) error {
	if err := n.check(ctx, strategy.ValidateSKU(sku)); err != nil {
		return err
	}
	return n.hold(ctx, sku, fn)
}

func (n *NamedLock) hold(ctx context.Context, sku string, fn func(context.Context, *sqlx.Conn) error) error {
	conn, err := n.conn(ctx)
	if err != nil {
		return err
	}
	name, err := n.lockName(ctx, conn, sku)
	if err != nil {
		conn.Close()
		return err
	}
	wait := n.timeout
	if dl, ok := ctx.Deadline(); ok {
		wait = max(0, min(wait, time.Until(dl)))
	}
	var got sql.NullInt64
	var id int64
	// A negative timeout would mean "forever" on MySQL and NULL on MariaDB;
	// wait is never negative.
	err = rowBound(ctx, conn, "SELECT GET_LOCK(?, ?), CONNECTION_ID()", name, wait.Seconds()).Scan(&got, &id)
	if err != nil {
		// If the context ended mid-wait the driver closed the socket; should
		// the server still grant the lock, it frees it with the session.
		conn.Close()
		return classify(ctx, err, unsent)
	}
	if !got.Valid || got.Int64 != 1 {
		conn.Close()
		if wait < n.timeout {
			// The caller's deadline, not the lock timeout, bounded the wait:
			// it is what ended it, and it is due within the server's timer
			// slack. Its error is the answer, as on every other strategy.
			<-ctx.Done()
			return strategy.Canceled(ctx)
		}
		return fmt.Errorf("%w: named lock of %q not obtained within %v", stockguard.ErrContention, sku, wait)
	}
	defer n.release(ctx, conn, name, id)
	return fn(ctx, conn)
}

// release frees the lock, or makes sure the session holding it ends.
func (n *NamedLock) release(ctx context.Context, conn *sqlx.Conn, name string, id int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	var released sql.NullInt64
	err := rowBound(ctx, conn, "SELECT RELEASE_LOCK(?)", name).Scan(&released)
	if err == nil && released.Valid && released.Int64 == 1 {
		conn.Close()
		return
	}
	// Returning driver.ErrBadConn from Raw makes database/sql close the
	// connection instead of pooling it.
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
	// The session may be busy with a statement and not see its socket
	// close until that ends. An error (1094 unknown thread: it is gone
	// already) changes nothing.
	n.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
}

// lockName returns sku's lock name, reading the pool's database name on the
// first call.
func (n *NamedLock) lockName(ctx context.Context, conn *sqlx.Conn, sku string) (string, error) {
	db := n.dbName.Load()
	if db == nil {
		var name sql.NullString
		if err := conn.QueryRowxContext(ctx, "SELECT DATABASE()").Scan(&name); err != nil {
			return "", classify(ctx, err, unsent)
		}
		db = &name.String
		n.dbName.Store(db)
	}
	return lockName(*db, n.table, sku), nil
}

func lockName(db, table, sku string) string {
	h := sha256.Sum256([]byte(db + "\x00" + table + "\x00" + sku))
	return "stockguard:" + hex.EncodeToString(h[:20])
}
