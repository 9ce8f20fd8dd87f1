package bench

import (
	"runtime"
	"runtime/debug"
	"time"
)

// Meta describes a run of several results as a whole, for the JSON report:
// the workload, where it ran and with which versions.
type Meta struct {
	// Time is when the run began.
	Time     time.Time    `json:"time"`
	Workload WorkloadMeta `json:"workload"`
	// Seed seeds the workers' request sequences: the same seed replays the
	// same requests.
	Seed    uint64   `json:"seed"`
	Servers []Server `json:"servers"`
	// RTTMs is the network round trip put between the clients and every
	// server (stockbench -rtt), in milliseconds; 0 for loopback.
	RTTMs float64 `json:"rtt_ms"`
	// GoVersion is the toolchain that built the harness; Module the
	// stockguard version it was built from ("(devel)" in a work tree) and
	// Revision its VCS revision when the build recorded one.
	GoVersion string `json:"go_version"`
	Module    string `json:"module_version"`
	Revision  string `json:"vcs_revision,omitempty"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	// Skipped says which targets could not run the workload, and why
	// ("X does not implement stockguard.Orders").
	Skipped []string `json:"skipped,omitempty"`
}

// WorkloadMeta is a Workload as the JSON report gives it, with every
// worker count run.
type WorkloadMeta struct {
	Shape     string  `json:"shape"`
	SKUs      int     `json:"skus"`
	Skew      string  `json:"skew"`
	Qty       string  `json:"qty"`
	Stock     int64   `json:"stock_per_sku"`
	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`
	Ops       int64   `json:"ops,omitempty"`
	// Drain is a steady run's drain requests per worker (Workload.Drain).
	Drain     int   `json:"drain,omitempty"`
	Instances int   `json:"instances"`
	Workers   []int `json:"workers"`
	// Orders is a checkout's order mix.
	Orders *OrderMixMeta `json:"orders,omitempty"`
}

// OrderMixMeta is an OrderMix as the JSON report gives it.
type OrderMixMeta struct {
	Lines        int     `json:"lines"`
	HoldShare    float64 `json:"hold_share"`
	HoldTTLMs    float64 `json:"hold_ttl_ms"`
	ReturnShare  float64 `json:"return_share"`
	RestockShare float64 `json:"restock_share"`
	ShortShare   float64 `json:"short_share"`
}

// NewMeta describes a run of workload w at the given worker counts on
// servers, begun at began, built by this binary.
func NewMeta(began time.Time, w Workload, workers []int, servers []Server) Meta {
	m := Meta{
		Time: began.UTC(), Seed: w.Seed, Servers: servers,
		Workload: WorkloadMeta{
			Shape: w.Shape.String(), SKUs: w.SKUs, Skew: w.Skew.String(), Qty: w.Qty(), Stock: w.InitialStock(),
			DurationS: w.Duration.Seconds(), WarmupS: w.Warmup.Seconds(), Ops: w.Ops, Instances: w.Instances,
			Workers: workers,
		},
		GoVersion: runtime.Version(), Module: "unknown",
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(),
	}
	if w.drains() {
		m.Workload.Drain = w.Drain
	}
	if w.Shape == Checkout {
		o := w.Orders
		m.Workload.Orders = &OrderMixMeta{
			Lines: o.Lines, HoldShare: o.HoldShare, HoldTTLMs: float64(o.HoldTTL) / float64(time.Millisecond),
			ReturnShare: o.ReturnShare, RestockShare: o.RestockShare, ShortShare: o.ShortShare,
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		m.Module = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				m.Revision = s.Value
			}
		}
	}
	if m.Servers == nil {
		m.Servers = []Server{}
	}
	return m
}
