package backendstest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/backends"
)

// CPU measures a benchmark's processor time per call, of this process and
// of the server: start it right before the calls, Report right after.
type CPU struct {
	read           func() (time.Duration, error) // the server's; nil: not measured
	client, server time.Duration                 // at the start
}

// StartCPU reads both processor times now; srv is the server's process,
// or nil for a server of the environment's, which the tests did not start
// (only the client is measured then).
func StartCPU(tb testing.TB, srv *backends.Process) *CPU {
	var read func() (time.Duration, error)
	if srv != nil {
		read = srv.CPU
	}
	return start(tb, read)
}

// StartRedisCPU is StartCPU for the Redis or Valkey server rdb reaches,
// whoever started it: its processor time is what its INFO cpu says (see
// backends.RedisCPU), its other clients' work included.
func StartRedisCPU(tb testing.TB, rdb redis.Cmdable) *CPU {
	return start(tb, func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		info, err := rdb.Info(ctx, "cpu").Result()
		if err != nil {
			return 0, err
		}
		return backends.RedisCPU(info)
	})
}

func start(tb testing.TB, read func() (time.Duration, error)) *CPU {
	c := &CPU{read: read, client: clientCPU(tb)}
	c.server = c.serverCPU(tb)
	return c
}

// Report reports, per call of b.N, the processor time this process used
// since the start (client_cpu_us_per_op, the benchmark's workers included)
// and, when it is measured, the server's (server_cpu_us_per_op): the
// names of stockbench's JSON fields.
func (c *CPU) Report(b *testing.B) {
	client, server := clientCPU(b)-c.client, c.serverCPU(b)-c.server
	b.ReportMetric(float64(client.Nanoseconds())/1e3/float64(b.N), "client_cpu_us_per_op")
	if c.read != nil {
		b.ReportMetric(float64(server.Nanoseconds())/1e3/float64(b.N), "server_cpu_us_per_op")
	}
}

// clientCPU returns the user and system processor time this process has
// used so far.
func clientCPU(tb testing.TB) time.Duration {
	d, err := backends.SelfCPU()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// serverCPU returns the processor time the server has used so far, or 0
// when it is not measured.
func (c *CPU) serverCPU(tb testing.TB) time.Duration {
	if c.read == nil {
		return 0
	}
	d, err := c.read()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}
