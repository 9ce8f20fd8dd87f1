package redislock

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/redislock/lock"
)

// TestForwarders_areTheLockLibrary: the contract's lock names here are
// package lock's — the same error values (errors.Is matches either name)
// and types — and New and NewRedlock hand their options on.
func TestForwarders_areTheLockLibrary(t *testing.T) {
	if ErrNotObtained != lock.ErrNotObtained || ErrNotHeld != lock.ErrNotHeld {
		t.Fatal("redislock's lock errors are not package lock's values")
	}
	rdb := closedClient(t)
	c, err := New(rdb, WithPrefix("app:"), WithReplicaAck(1, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var _ *lock.Client = c // the same type
	if got, want := c.LockKey("k"), must.New(lock.New(rdb, lock.WithPrefix("app:"))).LockKey("k"); got != want {
		t.Errorf("New's lock key %q, want lock.New's %q", got, want)
	}
	r, err := NewRedlock([]redis.UniversalClient{rdb, rdb, rdb}, WithPrefix("app:"), WithNodeTimeout(time.Second),
		WithDrift(0.1, time.Millisecond), WithAOFAck(1, 0, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.LockKey("k"), c.LockKey("k"); got != want || r.Quorum() != 2 {
		t.Errorf("NewRedlock: lock key %q, quorum %d; want %q, 2", got, r.Quorum(), want)
	}
	_, err = NewRedlock([]redis.UniversalClient{rdb}, WithNodeTimeout(-time.Second))
	checkInvalid(t, "NewRedlock with a negative node timeout", err)
}
