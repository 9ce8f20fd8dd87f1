package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/stockguard/stockguard"
)

// A buyer's tokens are revoked by the admin (POST /buyers/{buyer}/revoke):
// every token issued up to that second is refused from then on, by every
// copy; the login issues new ones from the next second. The time is kept in the backend, as the level of a SKU of the
// service's own (revokedSKU), so that the copies share it; each copy
// reads it again at most every -revocation-refresh, so a revocation holds
// on every copy within that.

// revokedSKU is the SKU whose level is the Unix second before which
// buyer's tokens are refused; none is stocked for a buyer never revoked.
func revokedSKU(buyer string) string { return reservedPrefix + "revoked:" + buyer }

// maxCachedRevocations bounds the cache: past it, it starts again empty.
const maxCachedRevocations = 1 << 16

// revocations caches each buyer's revocation time for refresh. A nil
// revocations reads the backend every time.
type revocations struct {
	refresh time.Duration

	mu   sync.Mutex
	seen map[string]revocation
}

type revocation struct {
	before int64 // Unix seconds; 0: never revoked
	read   time.Time
}

func newRevocations(refresh time.Duration) *revocations {
	return &revocations{refresh: refresh, seen: map[string]revocation{}}
}

// before returns the Unix second before which buyer's tokens are refused.
func (c *revocations) before(ctx context.Context, inv stockguard.Inventory, buyer string) (int64, error) {
	if c != nil {
		c.mu.Lock()
		r, ok := c.seen[buyer]
		c.mu.Unlock()
		if ok && time.Since(r.read) < c.refresh {
			return r.before, nil
		}
	}
	n, err := inv.Stock(ctx, revokedSKU(buyer))
	switch {
	case errors.Is(err, stockguard.ErrUnknownSKU):
		n = 0
	case err != nil:
		return 0, err
	}
	if c != nil {
		c.mu.Lock()
		if len(c.seen) >= maxCachedRevocations {
			clear(c.seen)
		}
		c.seen[buyer] = revocation{before: n, read: time.Now()}
		c.mu.Unlock()
	}
	return n, nil
}

// set records a revocation this copy made, so that it holds here at once.
func (c *revocations) set(buyer string, before int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[buyer] = revocation{before: before, read: time.Now()}
}

type revokeReply struct {
	Buyer string `json:"buyer"`
	// Before is the Unix second before which its tokens are refused.
	Before int64 `json:"revoked_before"`
}

// revoke refuses, from now on, every token of the buyer issued up to this
// second; the login issues it new ones.
func (s *server) revoke(w http.ResponseWriter, r *http.Request) {
	buyer := r.PathValue("buyer")
	if !validBuyer(buyer) {
		s.fail(w, fmt.Errorf("%w: not a buyer ID", stockguard.ErrInvalidRequest), "")
		return
	}
	ctx, cancel := s.opContext(r)
	defer cancel()
	before := time.Now().Unix() + 1
	if err := s.inv.SetStock(ctx, revokedSKU(buyer), before); err != nil {
		s.fail(w, err, "")
		return
	}
	s.revocations.set(buyer, before)
	_ = writeJSON(w, http.StatusOK, revokeReply{Buyer: buyer, Before: before})
}
