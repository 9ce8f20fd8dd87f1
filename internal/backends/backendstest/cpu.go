package backendstest

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard/internal/backends"
)

// CPU measures a benchmark's processor time per call, of this process and
// of the server: start it right before the calls, Report right after.
type CPU struct {
	srv            *backends.Process // nil: a server of the environment's, which the tests did not start
	client, server time.Duration     // at the start
}

// StartCPU reads both processor times now; srv is the server's process,
// or nil.
func StartCPU(tb testing.TB, srv *backends.Process) *CPU {
	return &CPU{srv: srv, client: clientCPU(tb), server: serverCPU(tb, srv)}
}

// Report reports, per call of b.N, the processor time this process used
// since StartCPU (client_cpu_us_per_op, the benchmark's workers included)
// and, when the tests started the server, that of the server's processes
// (server_cpu_us_per_op, see backends.Process.CPU): the names of
// stockbench's JSON fields.
func (c *CPU) Report(b *testing.B) {
	client, server := clientCPU(b)-c.client, serverCPU(b, c.srv)-c.server
	b.ReportMetric(float64(client.Nanoseconds())/1e3/float64(b.N), "client_cpu_us_per_op")
	if c.srv != nil {
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

// serverCPU returns the processor time srv's processes have used so far,
// or 0 when srv is nil.
func serverCPU(tb testing.TB, srv *backends.Process) time.Duration {
	if srv == nil {
		return 0
	}
	d, err := srv.CPU()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}
