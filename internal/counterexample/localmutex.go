package counterexample

import (
	"context"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard"
)

// LocalMutex is the "JVM lock": an in-process mutex (Java's
// ReentrantLock, Go's sync.Mutex) around SELECT, check, UPDATE of the stock
// row in MySQL. Within one process it is correct.
//
// How it breaks: deploy two instances of the service (a cluster deployment)
// and each has its own mutex. A buyer on instance A and one on instance B
// read the same level and both write level−qty: a lost update, reported as
// oversold. The harness runs every target as two instances, so it shows
// as soon as there are two workers.
type LocalMutex struct {
	mysqlStock
	mu sync.Mutex
}

var _ stockguard.Inventory = (*LocalMutex)(nil)

// NewLocalMutex uses the stock table of mysqllock's schema called table.
// Each call is one app instance with its own mutex. It returns an error
// wrapping ErrInvalidRequest when table is not a plain identifier.
func NewLocalMutex(db *sqlx.DB, table string) (*LocalMutex, error) {
	s, err := newMySQLStock(db, table)
	if err != nil {
		return nil, err
	}
	return &LocalMutex{mysqlStock: s}, nil
}

// ForceOverlap makes the pattern's race certain between two instances of
// one process: the first requests on each SKU of two instances meet
// between their read and their write. One instance alone is left alone.
func (l *LocalMutex) ForceOverlap() { l.forceAcross("mysql\x00" + l.table) }

// Decrement locks the instance's mutex, reads, checks, writes.
func (l *LocalMutex) Decrement(ctx context.Context, sku string, qty int64) error {
	if err := admit(ctx, sku, qty); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	have, err := l.read(ctx, l.db, sku)
	if err != nil {
		return err
	}
	if have < qty {
		return insufficient(sku, have, qty)
	}
	// Under this instance's mutex: only another instance can meet it.
	l.meet(ctx, "read", sku)
	return l.write(ctx, l.db, sku, have-qty)
}
