package combine

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/combine/combinetest"
)

// Under Config.Sealed a claimed request whose caller leaves before Seal is
// dropped — its context's error, Seal reports false, and Members leaves it
// out; one whose caller leaves after Seal is answered ErrOutcomeUnknown and
// left out of a later attempt: no request is written after its caller
// left, unless its statement was already on its way.
func TestCombiner_sealed(t *testing.T) {
	s := &stub{calls: make(chan *call)}
	c := New(Config[item]{Size: 64, Write: s.write, Answer: answer, Sealed: true})
	alone, first := stalled(t, c, s)
	before, cancelBefore := context.WithCancel(t.Context())
	after, cancelAfter := context.WithCancel(t.Context())
	goneBefore := do(before, c, "k", item{id: 1})
	combinetest.Queued(t, c, "k", 1)
	goneAfter := do(after, c, "k", item{id: 2})
	combinetest.Queued(t, c, "k", 2)
	stay := do(t.Context(), c, "k", item{id: 3})
	combinetest.Queued(t, c, "k", 3)
	alone.reply <- nil
	answered(t, first)
	w := s.next(t)
	if got := ids(w); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("first attempt %v", got)
	}
	cancelBefore()
	if err := answered(t, goneBefore); !errors.Is(err, context.Canceled) || errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("left before Seal: %v, want the context's error", err)
	}
	if w.batch.Seal() {
		t.Fatal("Seal: true with a member gone since Members")
	}
	if got := ids(w); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("second attempt %v, want [2 3]", got)
	}
	if !w.batch.Seal() {
		t.Fatal("Seal: false with every member there")
	}
	cancelAfter()
	if err := answered(t, goneAfter); !errors.Is(err, stockguard.ErrOutcomeUnknown) {
		t.Fatalf("left after Seal: %v, want ErrOutcomeUnknown", err)
	}
	if w.batch.Seal() {
		t.Fatal("Seal: true with a sealed member gone")
	}
	if got := ids(w); !slices.Equal(got, []int{3}) {
		t.Fatalf("third attempt %v, want [3]", got)
	}
	w.reply <- nil
	if err := answered(t, stay); err != nil {
		t.Fatal(err)
	}
}

// A write that runs on after Write returned (Batch.Continues) keeps its
// key busy: a request for the key queues until the write has ended.
func TestCombiner_continuesKeepsTheKeyBusy(t *testing.T) {
	running := make(chan struct{})
	var writes int
	c := New(Config[item]{Size: 64, Answer: answer, Write: func(ctx context.Context, key string, b *Batch[item]) error {
		writes++
		b.Members()
		if writes == 1 {
			b.Continues(running)
		}
		return nil
	}})
	if err := c.Do(t.Context(), "k", item{id: 1}); err != nil {
		t.Fatal(err)
	}
	next := do(t.Context(), c, "k", item{id: 2})
	combinetest.Queued(t, c, "k", 1)
	close(running)
	if err := answered(t, next); err != nil {
		t.Fatal(err)
	}
	if writes != 2 {
		t.Fatalf("%d writes, want 2", writes)
	}
}
