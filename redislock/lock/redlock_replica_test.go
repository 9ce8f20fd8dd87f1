package lock

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// TestRedlock_replicaAckSurvivesAVoterFailover: with one voter down, a
// lock needs both others, so a vote that only a master has (its replica
// stopped) must not count — a failover of that voter would free the lock
// and let a second holder in with the voter that was down. Once the
// replica confirms, the lock is granted, survives the failover of that
// voter (master killed, replica promoted), and nobody else obtains it.
func TestRedlock_replicaAckSurvivesAVoterFailover(t *testing.T) {
	voters, clients := backendstest.ReplicatedVoters(t, 3)
	ctx := t.Context()
	prefix := lockPrefix(t)
	opts := []Option{WithPrefix(prefix), WithNodeTimeout(time.Second), WithReplicaAck(1, 300*time.Millisecond)}
	r, err := NewRedlock(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}

	down := voters[2].Master.Proc
	if err := down.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { down.Resume() })
	lagging := voters[0].Replicas[0].Proc
	if err := lagging.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lagging.Resume() })
	if l, err := r.Obtain(ctx, "k", time.Minute); err == nil {
		l.Release(ctx)
		t.Fatal("Obtain granted with one voter down and another's vote on its master alone")
	}
	// The votes of a refused Obtain are released in the background.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		on := lockedOn(t, r, clients[:2], "k")
		if len(on) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the refused lock is left on masters %v", on)
		}
	}
	if err := lagging.Resume(); err != nil {
		t.Fatal(err)
	}
	l, err := r.Obtain(ctx, "k", time.Minute)
	if err != nil {
		t.Fatalf("Obtain with the replica back: %v", err)
	}

	// Voter 0 fails over: its master dies, its replica is promoted.
	if err := voters[0].Master.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	promoted := voters[0].Replicas[0].Client()
	t.Cleanup(func() { promoted.Close() })
	if err := promoted.Do(ctx, "replicaof", "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	if err := down.Resume(); err != nil {
		t.Fatal(err)
	}
	after := []redis.UniversalClient{promoted, clients[1], clients[2]}
	other, err := NewRedlock(after, WithPrefix(prefix), WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if on := lockedOn(t, other, after, "k"); len(on) < other.Quorum() {
		t.Fatalf("after the failover the lock is held on voters %v, want a quorum of %d", on, other.Quorum())
	}
	if l2, err := other.Obtain(ctx, "k", time.Minute); err == nil {
		l2.Release(ctx)
		t.Fatal("a second holder obtained the lock after one voter failed over")
	}
	if !l.Valid() {
		t.Fatal("the first holder's lock ran out during the test: nothing was checked")
	}
}
