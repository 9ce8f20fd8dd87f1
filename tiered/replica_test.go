package tiered

import (
	"context"
	"errors"
	"github.com/redis/go-redis/v9"
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/mysqllock"
)

// With a replica's acknowledgement on the front, an entry the master has
// alone — the replica stopped, the take answered ErrOutcomeUnknown — is
// not applied to the back until a replica has it: a failover could still
// take the order back from the front, and the back would keep an order
// the front forgot (its units sold again by the new master).
func TestConsumer_replicaAck_appliesOnlyReplicatedEntries(t *testing.T) {
	ctx := t.Context()
	rep := replicated(t)
	rdb := rep.Client()
	t.Cleanup(func() { rdb.Close() })
	db := backendstest.DB(t, multi)
	back, err := mysqllock.NewBatched(db, mysqllock.WithTable(newTable(t, db)))
	if err != nil {
		t.Fatal(err)
	}
	opts := []Option{WithPrefix("ack:"), WithReplicaAck(1, 100*time.Millisecond)}
	o, err := New(rdb, back, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	stock(t, o, 10, "a")
	c, err := NewConsumer(rdb, back, append(opts, WithClaimIdle(time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}

	replica := rep.Replicas[0].Proc
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := true
	t.Cleanup(func() {
		if paused {
			replica.Resume()
		}
	})
	if err := o.Take(ctx, "o1", line("a", 1)); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("Take with the replica stopped = %v, want ErrOutcomeUnknown", err)
	}
	for range 3 {
		c.Step(ctx) // not confirmed: an error, nothing applied
	}
	if _, err := back.Order(ctx, "o1"); !errors.Is(err, stockguard.ErrUnknownOrder) {
		t.Fatalf("the back's Order(o1) with no replica confirming the entry = %v, want ErrUnknownOrder", err)
	}
	wantStock(t, "back before a replica has the entry", back, "a", 10)

	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	paused = false
	q := NewStreams(rdb, StreamKey("ack:"), DefaultGroup)
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := q.Backlog(ctx)
		if err == nil && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left after the replica came back: %v, %v", len(left), left, err)
		}
		c.Step(ctx) // errors until the replica has caught up
	}
	info, err := back.Order(ctx, "o1")
	if err != nil || info.State != stockguard.OrderTaken {
		t.Fatalf("the back's Order(o1) once a replica has it = %+v, %v; want taken", info, err)
	}
	wantStock(t, "back", back, "a", 9)
}

// A consumer on a demoted master (a replica now: every XREADGROUP is a
// write it refuses, READONLY) backs off and goes on: ErrUnavailable, never
// an end of Run.
func TestConsumer_onReplica_backsOff(t *testing.T) {
	rep := replicated(t)
	rdb := rep.Replicas[0].Client()
	t.Cleanup(func() { rdb.Close() })
	db := backendstest.DB(t, multi)
	back, err := mysqllock.NewBatched(db, mysqllock.WithTable(newTable(t, db)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConsumer(rdb, back, WithPrefix("ro:"), WithReplicaAck(1, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(t.Context()); !errors.Is(err, stockguard.ErrUnavailable) {
		t.Fatalf("Step on a replica = %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("Run on a replica = %v, want nil at the context's end", err)
	}
}

// replicated starts a private master and replica for t.
func replicated(t *testing.T) *backends.Replicated {
	t.Helper()
	backendstest.SkipShort(t)
	rep, err := backends.StartLocalReplicated(t.Context(), 1)
	if err != nil {
		backendstest.Unavailable(t, err)
	}
	t.Cleanup(func() { rep.Close() })
	return rep
}

// Under an ACL user confined to the prefix's keys (~shop:*), every write of
// a front with a replica's acknowledgement, and every read of its
// Consumer, succeed: their witness keys are under the prefix too.
func TestOrders_replicaAck_aclConfinedToThePrefix(t *testing.T) {
	ctx := t.Context()
	rep := replicated(t)
	admin := rep.Client()
	t.Cleanup(func() { admin.Close() })
	if err := admin.Do(ctx, "ACL", "SETUSER", "shop", "on", ">pw", "resetkeys", "~shop:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: rep.Master.Addr, Username: "shop", Password: "pw"})
	t.Cleanup(func() { rdb.Close() })
	db := backendstest.DB(t, multi)
	back, err := mysqllock.NewBatched(db, mysqllock.WithTable(newTable(t, db)))
	if err != nil {
		t.Fatal(err)
	}
	opts := []Option{WithPrefix("shop:"), WithReplicaAck(1, 5*time.Second)}
	o, err := New(rdb, back, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	stock(t, o, 10, "a")
	if err := o.Take(ctx, "o1", line("a", 2)); err != nil {
		t.Fatalf("Take = %v, want nil", err)
	}
	if err := o.Return(ctx, "o1"); err != nil {
		t.Fatalf("Return = %v, want nil", err)
	}
	c, err := NewConsumer(rdb, back, opts...)
	if err != nil {
		t.Fatal(err)
	}
	q := NewStreams(rdb, StreamKey("shop:"), DefaultGroup)
	for {
		left, err := q.Backlog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if _, err := c.Step(ctx); err != nil {
			t.Fatalf("Step = %v, want nil", err)
		}
	}
	wantStock(t, "back", back, "a", 10)
	if info, err := back.Order(ctx, "o1"); err != nil || info.State != stockguard.OrderReturned {
		t.Errorf("the back's Order(o1) = %+v, %v; want returned", info, err)
	}
}
