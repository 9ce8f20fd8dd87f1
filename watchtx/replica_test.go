package watchtx

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/redistest"
	"github.com/stockguard/stockguard/stocktest"
)

func TestInventory_replicaAckConformance(t *testing.T) {
	r := backendstest.SharedReplicated(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	prefix := redistest.Prefix(t, rdb)
	stocktest.Run(t, func(t *testing.T) stockguard.Inventory {
		return must.New(New(rdb, WithPrefix(prefix), WithReplicaAck(1, 2*time.Second)))
	})
}

// TestInventory_replicaAckAfterExec: concurrent decrements on a hot key
// (so EXECs abort and retry) are each on the replica when acknowledged;
// with the replica paused every one is ErrOutcomeUnknown, and after it
// resumes master and replica agree on exactly those units gone.
func TestInventory_replicaAckAfterExec(t *testing.T) {
	r := backendstest.PrivateReplicated(t, 1)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	replica := r.Replicas[0].Client()
	t.Cleanup(func() { replica.Close() })
	ctx := t.Context()
	const initial = 1000
	inv, err := New(rdb, WithPrefix("p:"), WithReplicaAck(1, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.SetStock(ctx, "sku", initial); err != nil {
		t.Fatal(err)
	}
	var acked atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				if err := inv.Decrement(ctx, "sku", 1); err != nil {
					t.Errorf("Decrement: %v", err)
					return
				}
				sure := acked.Add(1)
				got, err := replica.Get(ctx, "p:stock:{sku}").Int64()
				if err != nil || got > initial-sure {
					t.Errorf("replica has %d (%v) right after the ack, want at most %d", got, err, initial-sure)
					return
				}
			}
		})
	}
	wg.Wait()

	if err := r.Replicas[0].Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Replicas[0].Proc.Resume() })
	inv = must.New(New(rdb, WithPrefix("p:"), WithReplicaAck(1, 300*time.Millisecond)))
	var unknown atomic.Int64
	for range 4 {
		wg.Go(func() {
			err := inv.Decrement(ctx, "sku", 1)
			if !errors.Is(err, stockguard.ErrOutcomeUnknown) {
				t.Errorf("Decrement with the replica paused: %v, want ErrOutcomeUnknown", err)
				return
			}
			unknown.Add(1)
		})
	}
	wg.Wait()
	if err := r.Replicas[0].Proc.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Wait(ctx, 1, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	want := initial - acked.Load() - unknown.Load()
	for name, c := range map[string]*redis.Client{"master": rdb, "replica": replica} {
		if got, err := c.Get(ctx, "p:stock:{sku}").Int64(); err != nil || got != want {
			t.Errorf("%s: %d, %v; want %d", name, got, err, want)
		}
	}
}

func TestInventory_badReplicaAck(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.Close()
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"zero replicas", []Option{WithReplicaAck(0, time.Second)}},
		{"absurd replicas", []Option{WithReplicaAck(101, time.Second)}},
		{"zero timeout", []Option{WithReplicaAck(1, 0)}},
		{"absurd timeout", []Option{WithReplicaAck(1, 2*time.Minute)}},
		{"sub-millisecond", []Option{WithReplicaAck(1, time.Millisecond+1)}},
		{"aof nothing", []Option{WithAOFAck(0, 0, time.Second)}},
		{"aof local 2", []Option{WithAOFAck(2, 1, time.Second)}},
		{"both", []Option{WithAOFAck(1, 0, time.Second), WithReplicaAck(1, time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if inv, err := New(rdb, tc.opts...); inv != nil || !errors.Is(err, stockguard.ErrInvalidRequest) {
				t.Errorf("New: %v, %v; want nil and ErrInvalidRequest", inv, err)
			}
		})
	}
}
