package lock

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// BenchmarkClient_cycle measures one uncontended Obtain+Release cycle of a
// fenced lock on a fresh key, with allocations: the lock family's hot path.
func BenchmarkClient_cycle(b *testing.B) {
	c, _ := newTestClient(b)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		l, err := c.Obtain(ctx, strconv.Itoa(i), 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
