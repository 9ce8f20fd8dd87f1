package bench

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Backend is a kind of server targets run on — MySQL, Redis, the extra
// Redlock voters — registered by the package that knows how to reach it,
// together with the targets built on it, as database/sql drivers register
// themselves. The package bench/all imports every such package.
type Backend struct {
	// Name is how targets' Needs refer to the backend ("mysql").
	Name string
	// About says in a line what the backend is and how its servers are
	// found, for stockbench -h.
	About string
	// Flags defines the backend's command-line flags on fs and returns its
	// opener, which reads their values once fs is parsed. Tests call it on
	// a flag set they never parse, to open with the defaults.
	Flags func(fs *flag.FlagSet) Opener
}

// Opener opens one backend's servers with the values of its flags.
type Opener struct {
	// Check validates the flags' values before any server is contacted;
	// its error is the user's (stockbench exits with its usage status).
	// Nil when there is nothing to check.
	Check func() error
	// Open connects to the servers — those the flags name, else ones it
	// finds or starts — as c says. An opener that cannot put c.RTT between
	// its clients and its servers returns an error when it is not 0.
	Open func(ctx context.Context, c OpenConfig) (*Opened, error)
}

// OpenConfig is how an Opener connects.
type OpenConfig struct {
	// Pool is the size of each connection pool.
	Pool int
	// RTT, when not 0, is the network round trip to put between the
	// clients and every server: connections go through a forwarder on
	// loopback that delays each direction by RTT/2 (see Route).
	RTT time.Duration
}

// Opened is a backend's open servers.
type Opened struct {
	// Conn is what targets find under the backend's name in Servers.
	Conn any
	// Servers describes each server, for reports.
	Servers []Server
	// Close closes Conn and stops any server started for it.
	Close func() error
	// Args are the backend's command-line flags that make its Opener, in
	// another process, open these same servers rather than find or start
	// its own ("-redis-addr", "127.0.0.1:6379"): stockbench -procs hands
	// them to its worker processes. Nil when the servers cannot be shared.
	Args []string
}

// Server describes one server a run used.
type Server struct {
	Backend string `json:"backend"`
	Product string `json:"product"` // "MySQL", "MariaDB", "Redis"
	Version string `json:"version"`
	Addr    string `json:"addr"`
	// Source says how it was found: the flag that named it, "env", "local"
	// (started from a binary on PATH) or "docker".
	Source string `json:"source"`
	// Settings, when set, are server settings the figures depend on, as the
	// server reports them ("innodb_flush_log_at_trx_commit=1 …").
	Settings string `json:"settings,omitempty"`
	// CPU reads the processor time the server has used so far, for the
	// CPU it spends per operation (see Result.ServerCPU); nil when it
	// cannot be read, CPUFrom then says why. A server this run started:
	// its processes' time from /proc; any Redis or Valkey: INFO cpu.
	CPU func(ctx context.Context) (time.Duration, error) `json:"-"`
	// CPUFrom says where CPU reads ("process", "INFO cpu"), or why the
	// server's CPU is not measured.
	CPUFrom string `json:"cpu_from,omitempty"`
}

// String reads "redis: Redis 7.0.15 at 127.0.0.1:6379 (env)", followed by
// the settings in brackets when there are any.
func (s Server) String() string {
	out := fmt.Sprintf("%s: %s %s at %s (%s)", s.Backend, s.Product, s.Version, s.Addr, s.Source)
	if s.Settings != "" {
		out += " [" + s.Settings + "]"
	}
	return out
}

var registry struct {
	mu              sync.Mutex
	backends        []Backend
	targets         []Target
	counterexamples []Target
}

// RegisterBackend makes a backend known. It panics when b has no name, no
// Flags, or a name already registered — a programming error, caught at
// start-up.
func RegisterBackend(b Backend) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if b.Name == "" || b.Flags == nil {
		panic(fmt.Sprintf("bench: RegisterBackend: incomplete backend %+v", b))
	}
	if slices.ContainsFunc(registry.backends, func(o Backend) bool { return o.Name == b.Name }) {
		panic("bench: RegisterBackend: " + b.Name + " registered twice")
	}
	registry.backends = append(registry.backends, b)
}

// Register adds a strategy, or a counterexample when t.Counterexample is
// set; reports list them in the order registered. It panics when t has no
// name, no About or no Open, or a name already registered.
func Register(t Target) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if t.Name == "" || t.About == "" || t.Open == nil {
		panic(fmt.Sprintf("bench: Register: incomplete target %q", t.Name))
	}
	if _, ok := lookup(t.Name); ok {
		panic("bench: Register: " + t.Name + " registered twice")
	}
	if t.Counterexample {
		registry.counterexamples = append(registry.counterexamples, t)
	} else {
		registry.targets = append(registry.targets, t)
	}
}

// Backends returns the registered backends, in registration order.
func Backends() []Backend {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return slices.Clone(registry.backends)
}

// Targets returns the registered strategies, in registration order.
func Targets() []Target {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return slices.Clone(registry.targets)
}

// Counterexamples returns the registered counterexamples.
func Counterexamples() []Target {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return slices.Clone(registry.counterexamples)
}

// Lookup returns the strategy or counterexample called name.
func Lookup(name string) (Target, bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return lookup(name)
}

func lookup(name string) (Target, bool) {
	for _, list := range [][]Target{registry.targets, registry.counterexamples} {
		if i := slices.IndexFunc(list, func(t Target) bool { return t.Name == name }); i >= 0 {
			return list[i], true
		}
	}
	return Target{}, false
}
