package lock

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

// BenchmarkRedlock measures the latency of an uncontended Obtain+Release
// cycle: a Redlock over 5 private masters against the single-master lock
// (Client) on one of the same servers, in one run. Metrics: ns/op (the
// mean cycle) and p99-µs.
func BenchmarkRedlock(b *testing.B) {
	servers := backendstest.PrivateRedis(b, 5)
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		c := s.Client()
		b.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	redlock, err := NewRedlock(clients, WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	single, err := New(clients[0], WithPrefix("bench:"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	cycles := map[string]func() error{
		"lock=single/masters=1": func() error {
			l, err := single.Obtain(ctx, "k", 10*time.Second)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		},
		"lock=redlock/masters=5": func() error {
			l, err := redlock.Obtain(ctx, "k", 10*time.Second)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		},
	}
	for _, name := range []string{"lock=single/masters=1", "lock=redlock/masters=5"} {
		cycle := cycles[name]
		b.Run(name, func(b *testing.B) {
			for range 100 { // connections dialled, scripts loaded
				if err := cycle(); err != nil {
					b.Fatal(err)
				}
			}
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				began := time.Now()
				if err := cycle(); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(began))
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}
