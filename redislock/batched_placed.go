package redislock

import (
	"sync"

	"github.com/stockguard/stockguard"
)

// placedKept is how many orders a Batched instance remembers the lines of,
// among those it placed itself, so that their Confirm or Return skips the
// read of the record (see Batched.Confirm).
const placedKept = 16384

// placedLines remembers the lines of the orders a Batched instance placed,
// the newest placedKept of them. What it says is only a guess: the
// batch script checks the lines against the order's record before it acts,
// and answers "read it again" when they differ (the ID was placed by
// another client since, or past its retention), so a stale entry costs a
// read, never a wrong decision.
type placedLines struct {
	mu    sync.Mutex
	lines map[string][]stockguard.Line
	ring  []string // the IDs in the order they were kept; next overwrites the oldest
	next  int
}

func newPlacedLines(n int) *placedLines {
	return &placedLines{lines: make(map[string][]stockguard.Line, n), ring: make([]string, n)}
}

// keep remembers that id was placed with lines (sorted by SKU).
func (p *placedLines) keep(id string, lines []stockguard.Line) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.lines[id]; ok {
		p.lines[id] = lines
		return
	}
	if old := p.ring[p.next]; old != "" {
		delete(p.lines, old)
	}
	p.ring[p.next] = id
	p.next = (p.next + 1) % len(p.ring)
	p.lines[id] = lines
}

// get returns the lines id was placed with, if they are remembered.
func (p *placedLines) get(id string) ([]stockguard.Line, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls, ok := p.lines[id]
	return ls, ok
}

// forget drops id's lines: they were not the record's, or its order is over.
func (p *placedLines) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Its ring slot is reused in turn. Should id be kept again before then,
	// that slot drops it early: a read more, nothing else.
	delete(p.lines, id)
}
