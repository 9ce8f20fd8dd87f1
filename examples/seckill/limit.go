package main

import (
	"sync"
	"time"
)

// While a backend is down every request fails, and a WARN line for each
// would flood the log (thousands a second) and cost the CPU the buyers
// need. The service logs at most warnBurst of them per warnEvery; the next
// line logged says how many were left out before it. The metrics
// (stockguard_operations_total by outcome) count every one.
const (
	warnBurst = 10
	warnEvery = time.Second
)

// limiter lets through at most burst events per window of every. A nil
// limiter lets every event through.
type limiter struct {
	burst int
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	windowEnds time.Time
	used       int
	dropped    int
}

func newLimiter(burst int, every time.Duration) *limiter {
	return &limiter{burst: burst, every: every, now: time.Now}
}

// allow reports whether an event may go through now and, when it may, how
// many were refused since the last one allowed.
func (l *limiter) allow() (ok bool, dropped int) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := l.now(); !now.Before(l.windowEnds) {
		l.windowEnds, l.used = now.Add(l.every), 0
	}
	if l.used >= l.burst {
		l.dropped++
		return false, 0
	}
	l.used++
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// warn logs a WARN line through the server's limiter.
func (s *server) warn(msg string, args ...any) {
	ok, dropped := s.warnings.allow()
	if !ok {
		return
	}
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	s.log.Warn(msg, args...)
}
