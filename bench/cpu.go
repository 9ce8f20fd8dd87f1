package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stockguard/stockguard/internal/backends"
)

// CPU sources a Server's CPUFrom names.
const (
	CPUFromProcess = "process"  // the /proc times of a server this run started
	CPUFromInfo    = "INFO cpu" // a Redis or Valkey server's own count
	// CPUNotReadable is the reason for a server neither started here nor
	// a Redis: its processes belong to another user or machine.
	CPUNotReadable = "not measured: neither started by this run nor a Redis"
)

// ProcessCPU is a Server.CPU that reads the processor time of p, a server
// this run started, and its children (see backends.Process.CPU).
func ProcessCPU(p *backends.Process) func(context.Context) (time.Duration, error) {
	return func(context.Context) (time.Duration, error) { return p.CPU() }
}

// ServerCPU is the processor time one server spent over a measured window.
type ServerCPU struct {
	Backend, Addr string
	// CPU is the time spent, valid when Err is "".
	CPU time.Duration
	// From says how CPU was read (Server.CPUFrom); Err why it was not.
	From, Err string
}

// WithServerCPU makes Run measure the processor time each server of
// servers that the target needs spends over the measured window, from the
// server's own CPU reader (Server.CPU), into Result.ServerCPU. Default: no
// server is measured. The client's time is measured always (see
// Result.ClientCPU).
func WithServerCPU(servers []Server) Option {
	return func(o *runOptions) { o.servers = servers }
}

// cpuMeter measures the processor time of the client and of the servers
// of a target over a window.
type cpuMeter struct {
	client  time.Duration
	clientE error
	servers []ServerCPU
	readers []func(context.Context) (time.Duration, error) // per servers[i], nil when not read
}

// cpuReadTimeout bounds each read of a server's CPU.
const cpuReadTimeout = 10 * time.Second

// startCPU reads the client's processor time and that of each server in
// servers whose backend is in needs.
func startCPU(ctx context.Context, servers []Server, needs []string) *cpuMeter {
	m := &cpuMeter{}
	m.client, m.clientE = backends.SelfCPU()
	for _, s := range servers {
		if !slices.Contains(needs, s.Backend) {
			continue
		}
		sc := ServerCPU{Backend: s.Backend, Addr: s.Addr, From: s.CPUFrom}
		read := s.CPU
		if read == nil {
			sc.From, sc.Err = "", s.CPUFrom
			if sc.Err == "" {
				sc.Err = CPUNotReadable
			}
		} else if d, err := readCPU(ctx, read); err != nil {
			sc.Err, read = err.Error(), nil
		} else {
			sc.CPU = d
		}
		m.servers = append(m.servers, sc)
		m.readers = append(m.readers, read)
	}
	return m
}

func readCPU(ctx context.Context, read func(context.Context) (time.Duration, error)) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cpuReadTimeout)
	defer cancel()
	return read(ctx)
}

// stop reads every processor time again and puts the differences in res.
func (m *cpuMeter) stop(ctx context.Context, res *Result) {
	if m.clientE == nil {
		if now, err := backends.SelfCPU(); err == nil {
			res.ClientCPU = now - m.client
		}
	}
	for i, read := range m.readers {
		sc := m.servers[i]
		if read != nil {
			now, err := readCPU(ctx, read)
			switch {
			case err != nil:
				sc.CPU, sc.Err = 0, err.Error()
			case now < sc.CPU:
				sc.CPU, sc.Err = 0, fmt.Sprintf("its CPU time went back from %v to %v: restarted?", sc.CPU, now)
			default:
				sc.CPU = now - sc.CPU
			}
		}
		res.ServerCPU = append(res.ServerCPU, sc)
	}
}

// perOp returns d per operation in microseconds.
func perOp(d time.Duration, ops int64) float64 {
	if ops <= 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(ops)
}

// ServerCPUPerOp returns the processor time, in microseconds, that the
// servers r measured spent together per measured request (Attempts), and
// whether any server's time was measured.
func (r *Result) ServerCPUPerOp() (float64, bool) {
	var sum time.Duration
	ok := false
	for _, s := range r.ServerCPU {
		if s.Err == "" {
			sum += s.CPU
			ok = true
		}
	}
	if !ok || r.Attempts == 0 {
		return 0, false
	}
	return perOp(sum, r.Attempts), true
}

// ClientCPUPerOp returns the processor time, in microseconds, that the
// client process (its workers, the strategy's client code, the harness)
// spent per measured request, and whether it was measured.
func (r *Result) ClientCPUPerOp() (float64, bool) {
	if r.ClientCPU <= 0 || r.Attempts == 0 {
		return 0, false
	}
	return perOp(r.ClientCPU, r.Attempts), true
}
