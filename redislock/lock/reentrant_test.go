package lock

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestReentrant_property drives one owner through random nesting depths and
// release orders while a foreign owner keeps trying to obtain, release and
// extend the lock. After every step the hash must hold exactly the owner's
// open handles, every nested acquisition the outermost token, and the key
// must be gone exactly when no handle is open.
func TestReentrant_property(t *testing.T) {
	c, rdb := newTestClient(t)
	ctx := t.Context()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	owner, foreigner := NewOwner(), NewOwner()
	lockKey := c.keys.Lock("k")

	var open []*Lock
	var token, lastToken int64
	check := func(step int, what string) {
		t.Helper()
		n, err := rdb.HGet(ctx, lockKey, owner.String()).Int64()
		if len(open) == 0 {
			if rdb.Exists(ctx, lockKey).Val() != 0 {
				t.Fatalf("step %d (%s): no handle open, key still there", step, what)
			}
			return
		}
		if err != nil || n != int64(len(open)) {
			t.Fatalf("step %d (%s): hold count %d (%v), want %d", step, what, n, err, len(open))
		}
		if fields := rdb.HLen(ctx, lockKey).Val(); fields != 1 {
			t.Fatalf("step %d (%s): %d owners in the hash", step, what, fields)
		}
	}
	for step := range 300 {
		switch op := rng.IntN(10); {
		case op < 5: // obtain (nest)
			l, err := c.Obtain(ctx, "k", 10*time.Second, Reentrant(owner))
			if err != nil {
				t.Fatalf("step %d: owner could not re-enter: %v", step, err)
			}
			if len(open) == 0 {
				if l.Token() <= lastToken {
					t.Fatalf("step %d: fresh acquisition token %d after %d", step, l.Token(), lastToken)
				}
				token, lastToken = l.Token(), l.Token()
			} else if l.Token() != token {
				t.Fatalf("step %d: nested token %d, outermost %d", step, l.Token(), token)
			}
			open = append(open, l)
			check(step, "obtain")
		case op < 8 && len(open) > 0: // release a random handle
			i := rng.IntN(len(open))
			if err := open[i].Release(ctx); err != nil {
				t.Fatalf("step %d: release: %v", step, err)
			}
			released := open[i]
			open = append(open[:i], open[i+1:]...)
			check(step, "release")
			if err := released.Release(ctx); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("step %d: second release of one handle = %v, want ErrNotHeld", step, err)
			}
			check(step, "second release")
		default: // the foreigner tries
			f, err := c.Obtain(ctx, "k", 10*time.Second, Reentrant(foreigner))
			if len(open) > 0 {
				if !errors.Is(err, ErrNotObtained) {
					t.Fatalf("step %d: foreign owner Obtain = %v, want ErrNotObtained", step, err)
				}
				forged := &Lock{c: c, key: "k", keys: c.keysFor("k", true), owner: foreigner.String(), reentrant: true, ttl: time.Second, validUntil: time.Now().Add(time.Second)}
				if err := forged.Refresh(ctx, time.Hour); !errors.Is(err, ErrNotHeld) {
					t.Fatalf("step %d: foreign Refresh = %v, want ErrNotHeld", step, err)
				}
				if err := forged.Release(ctx); !errors.Is(err, ErrNotHeld) {
					t.Fatalf("step %d: foreign Release = %v, want ErrNotHeld", step, err)
				}
				if pttl := rdb.PTTL(ctx, lockKey).Val(); pttl > 10*time.Second {
					t.Fatalf("step %d: foreign Refresh extended the lease to %v", step, pttl)
				}
				check(step, "foreigner refused")
				continue
			}
			if err != nil {
				t.Fatalf("step %d: foreign owner could not obtain a free lock: %v", step, err)
			}
			if f.Token() <= lastToken {
				t.Fatalf("step %d: token %d after %d", step, f.Token(), lastToken)
			}
			lastToken = f.Token()
			if _, err := c.Obtain(ctx, "k", time.Second, Reentrant(owner)); !errors.Is(err, ErrNotObtained) {
				t.Fatalf("step %d: owner obtained the foreigner's lock: %v", step, err)
			}
			if err := f.Release(ctx); err != nil {
				t.Fatal(err)
			}
			check(step, "foreigner's turn")
		}
	}
}

func TestReentrant_excludesPlainLocks(t *testing.T) {
	c, _ := newTestClient(t)
	ctx := t.Context()
	plain, err := c.Obtain(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(ctx, "k", time.Second, Reentrant(NewOwner())); !errors.Is(err, ErrNotObtained) {
		t.Fatalf("reentrant Obtain over a plain lock = %v, want ErrNotObtained", err)
	}
	if err := plain.Release(ctx); err != nil {
		t.Fatal(err)
	}
	re, err := c.Obtain(ctx, "k", 10*time.Second, Reentrant(NewOwner()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(ctx, "k", time.Second); !errors.Is(err, ErrNotObtained) {
		t.Fatalf("plain Obtain over a reentrant lock = %v, want ErrNotObtained", err)
	}
	// A plain handle whose key now holds a hash is refused, not crashed.
	if err := plain.Refresh(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("plain Refresh over a reentrant lock = %v, want ErrNotHeld", err)
	}
	if err := re.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestReentrant_nestedNeverShortensTheLease(t *testing.T) {
	c, _ := newTestClient(t)
	ctx := t.Context()
	owner := NewOwner()
	outer, err := c.Obtain(ctx, "k", 10*time.Second, Reentrant(owner))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Obtain(ctx, "k", 100*time.Millisecond, Reentrant(owner))
	if err != nil {
		t.Fatal(err)
	}
	if ttl, err := outer.TTL(ctx); err != nil || ttl < 9*time.Second {
		t.Fatalf("TTL after a short nested Obtain = %v, %v", ttl, err)
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := outer.TTL(ctx); err != nil {
		t.Fatalf("outer hold gone after the inner release: %v", err)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
