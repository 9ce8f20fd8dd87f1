package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeCPU is a server CPU reader that returns its readings in turn.
func fakeCPU(readings ...any) func(context.Context) (time.Duration, error) {
	i := 0
	return func(context.Context) (time.Duration, error) {
		r := readings[i]
		i++
		if err, ok := r.(error); ok {
			return 0, err
		}
		return r.(time.Duration), nil
	}
}

func TestCPUMeter(t *testing.T) {
	const ms = time.Millisecond
	type want struct {
		cpu  time.Duration
		err  bool
		from string
	}
	for _, c := range []struct {
		name     string
		servers  []Server
		needs    []string
		attempts int64
		want     []want
		perOp    float64 // µs, all measured servers together
		measured bool
	}{
		{
			name:     "one process",
			servers:  []Server{{Backend: "mysql", CPU: fakeCPU(100*ms, 300*ms), CPUFrom: CPUFromProcess}},
			needs:    []string{"mysql"},
			attempts: 1000,
			want:     []want{{cpu: 200 * ms, from: CPUFromProcess}},
			perOp:    200, measured: true,
		},
		{
			name: "two servers added up, a third not needed",
			servers: []Server{
				{Backend: "redis", CPU: fakeCPU(1*ms, 51*ms), CPUFrom: CPUFromInfo},
				{Backend: "mysql", CPU: fakeCPU(10*ms, 32*ms), CPUFrom: CPUFromProcess},
				{Backend: "postgres", CPU: fakeCPU(time.Duration(0), time.Hour), CPUFrom: CPUFromProcess},
			},
			needs:    []string{"redis", "mysql"},
			attempts: 2000,
			want:     []want{{cpu: 50 * ms, from: CPUFromInfo}, {cpu: 22 * ms, from: CPUFromProcess}},
			perOp:    36, measured: true,
		},
		{
			name:     "neither started here nor a Redis",
			servers:  []Server{{Backend: "mysql", CPUFrom: CPUNotReadable}},
			needs:    []string{"mysql"},
			attempts: 1000,
			want:     []want{{err: true}},
		},
		{
			name:     "no reader, no reason given",
			servers:  []Server{{Backend: "mysql"}},
			needs:    []string{"mysql"},
			attempts: 1000,
			want:     []want{{err: true}},
		},
		{
			name: "one unreadable, the other counts",
			servers: []Server{
				{Backend: "redis", CPU: fakeCPU(time.Duration(0), errors.New("NOPERM")), CPUFrom: CPUFromInfo},
				{Backend: "redlock", CPU: fakeCPU(5*ms, 8*ms), CPUFrom: CPUFromInfo},
			},
			needs:    []string{"redis", "redlock"},
			attempts: 3,
			want:     []want{{err: true, from: CPUFromInfo}, {cpu: 3 * ms, from: CPUFromInfo}},
			perOp:    1000, measured: true,
		},
		{
			name:     "restarted meanwhile",
			servers:  []Server{{Backend: "redis", CPU: fakeCPU(5*ms, 1*ms), CPUFrom: CPUFromInfo}},
			needs:    []string{"redis"},
			attempts: 10,
			want:     []want{{err: true, from: CPUFromInfo}},
		},
		{
			name:     "unreadable at the start",
			servers:  []Server{{Backend: "redis", CPU: fakeCPU(errors.New("down")), CPUFrom: CPUFromInfo}},
			needs:    []string{"redis"},
			attempts: 10,
			want:     []want{{err: true, from: CPUFromInfo}},
		},
		{
			name:     "no requests",
			servers:  []Server{{Backend: "redis", CPU: fakeCPU(time.Duration(0), ms), CPUFrom: CPUFromInfo}},
			needs:    []string{"redis"},
			attempts: 0,
			want:     []want{{cpu: ms, from: CPUFromInfo}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := startCPU(t.Context(), c.servers, c.needs)
			res := &Result{Attempts: c.attempts}
			m.stop(t.Context(), res)
			if len(res.ServerCPU) != len(c.want) {
				t.Fatalf("ServerCPU %+v, want %d servers", res.ServerCPU, len(c.want))
			}
			for i, w := range c.want {
				got := res.ServerCPU[i]
				if (got.Err != "") != w.err || (!w.err && got.CPU != w.cpu) || (w.from != "" && got.From != w.from) {
					t.Errorf("server %d: %+v, want %+v", i, got, w)
				}
			}
			perOp, ok := res.ServerCPUPerOp()
			if ok != c.measured || perOp != c.perOp {
				t.Errorf("ServerCPUPerOp = %v, %v, want %v, %v", perOp, ok, c.perOp, c.measured)
			}
			row := NewRow(res)
			if c.measured != (row.ServerCPUUsPerOp != nil) || (c.measured && *row.ServerCPUUsPerOp != c.perOp) {
				t.Errorf("row server_cpu_us_per_op %v, want %v (measured %v)", row.ServerCPUUsPerOp, c.perOp, c.measured)
			}
		})
	}
}

func TestResult_ClientCPUPerOp(t *testing.T) {
	for _, c := range []struct {
		cpu      time.Duration
		attempts int64
		want     float64
		ok       bool
	}{
		{cpu: 64 * time.Millisecond, attempts: 1000, want: 64, ok: true},
		{cpu: 1500 * time.Nanosecond, attempts: 3, want: 0.5, ok: true},
		{cpu: 0, attempts: 1000},
		{cpu: time.Second, attempts: 0},
	} {
		r := &Result{ClientCPU: c.cpu, Attempts: c.attempts}
		if got, ok := r.ClientCPUPerOp(); got != c.want || ok != c.ok {
			t.Errorf("ClientCPU %v over %d: %v, %v, want %v, %v", c.cpu, c.attempts, got, ok, c.want, c.ok)
		}
	}
}
