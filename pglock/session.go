package pglock

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// sessionInit runs a SET statement once on every pooled connection that a
// strategy uses, instead of once per request (SET LOCAL would cost a round
// trip per transaction): the setting outlives the request on the
// connection, since database/sql's session reset does not clear it (pgx's
// stdlib ResetSession only checks the connection).
//
// Connections are recognised by their driver connection, used only as a
// map key. When the map grows, entries unused for sessionIdle are dropped:
// closed connections go, and a live one that idled that long merely runs
// the statement again. Another user of the same pool who changes the
// setting on a connection would go unnoticed; the constructors' doc
// comments say to leave it alone.
type sessionInit struct {
	stmt string

	mu    sync.Mutex
	done  map[driver.Conn]time.Time // when each connection last served a request
	limit int                       // prune when done reaches it
}

// sessionIdle is how long a connection may go unused before its entry may
// be pruned.
const sessionIdle = time.Minute

func newSessionInit(stmt string) *sessionInit {
	return &sessionInit{stmt: stmt, done: map[driver.Conn]time.Time{}, limit: 64}
}

// lockTimeoutSession bounds a session's lock waits to d.
func lockTimeoutSession(d time.Duration) *sessionInit {
	return newSessionInit(fmt.Sprintf("SET lock_timeout = '%dms'", d.Milliseconds()))
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
	if _, err := conn.ExecContext(ctx, s.stmt); err != nil {
		return classify(ctx, err, unsent)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.done) >= s.limit {
		for c, used := range s.done {
			if now.Sub(used) > sessionIdle {
				delete(s.done, c)
			}
		}
		s.limit = max(64, 2*len(s.done))
	}
	s.done[dc] = now
	return nil
}
