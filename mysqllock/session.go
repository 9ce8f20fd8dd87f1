package mysqllock

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// sessionInit runs a SET SESSION statement once on every pooled connection
// that a strategy uses, instead of once per request: the setting outlives
// the request on the connection (database/sql's session reset does not
// clear session variables), so re-sending it would cost a round trip per
// request for nothing.
//
// Connections are recognised by their driver connection, which is used only
// as a map key and, when the map grows, to drop connections the pool has
// closed (driver.Validator, an atomic flag in go-sql-driver/mysql). Another
// user of the same pool who changes the variable on a connection would go
// unnoticed; the package's doc comments say to leave it alone.
type sessionInit struct {
	stmt string

	mu    sync.Mutex
	done  map[driver.Conn]struct{}
	limit int // prune when done reaches it
}

func newSessionInit(stmt string) *sessionInit {
	return &sessionInit{stmt: stmt, done: map[driver.Conn]struct{}{}, limit: 64}
}

// apply runs the statement on conn unless it ran there before. Nothing it
// sends changes stock.
func (s *sessionInit) apply(ctx context.Context, conn *sqlx.Conn) error {
	var dc driver.Conn
	if err := conn.Raw(func(c any) error {
		dc, _ = c.(driver.Conn)
		return nil
	}); err != nil {
		return classify(ctx, err, unsent)
	}
	s.mu.Lock()
	_, ok := s.done[dc]
	s.mu.Unlock()
	if ok {
		return nil
	}
	done, err := enter(ctx, phaseRead) // a session setting changes no stock
	if err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, s.stmt)
	done()
	if err != nil {
		return classify(ctx, err, unsent)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.done) >= s.limit {
		for c := range s.done {
			if v, ok := c.(driver.Validator); !ok || !v.IsValid() {
				delete(s.done, c)
			}
		}
		s.limit = max(64, 2*len(s.done))
	}
	s.done[dc] = struct{}{}
	return nil
}

// lockWaitSession bounds a session's row-lock waits to d, rounded up to
// whole seconds.
func lockWaitSession(d time.Duration) *sessionInit {
	secs := int64((d + time.Second - 1) / time.Second)
	return newSessionInit(fmt.Sprintf("SET SESSION innodb_lock_wait_timeout = %d", secs))
}
