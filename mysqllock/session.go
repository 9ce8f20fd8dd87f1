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
// Connections are recognised by their driver connection, used only as a
// map key: a connection in use belongs to another request, and even
// driver.Validator is not safe to call on it (go-sql-driver/mysql's
// IsValid reads its buffer, which the data race detector reports under
// connection churn — found by the fault suite). When the map grows, entries
// unused for sessionIdle are dropped: closed connections go, and a live one
// that idled that long merely runs the statement again. Another user of the
// same pool who changes the variable on a connection would go unnoticed; the
// package's doc comments say to leave it alone.
type sessionInit struct {
	stmt string

	idle time.Duration // sessionIdle; tests shorten it

	mu    sync.Mutex
	done  map[driver.Conn]time.Time // when each connection last served a request
	limit int                       // prune when done reaches it
}

// sessionIdle is how long a connection may go unused before its entry may
// be pruned.
const sessionIdle = time.Minute

func newSessionInit(stmt string) *sessionInit {
	return &sessionInit{stmt: stmt, idle: sessionIdle, done: map[driver.Conn]time.Time{}, limit: 64}
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
	now := time.Now()
	s.mu.Lock()
	_, ok := s.done[dc]
	if ok {
		s.done[dc] = now
	}
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
		for c, used := range s.done {
			if now.Sub(used) > s.idle {
				delete(s.done, c)
			}
		}
		s.limit = max(64, 2*len(s.done))
	}
	s.done[dc] = now
	return nil
}

// lockWaitSession bounds a session's row-lock waits to d, rounded up to
// whole seconds.
func lockWaitSession(d time.Duration) *sessionInit {
	secs := int64((d + time.Second - 1) / time.Second)
	return newSessionInit(fmt.Sprintf("SET SESSION innodb_lock_wait_timeout = %d", secs))
}
