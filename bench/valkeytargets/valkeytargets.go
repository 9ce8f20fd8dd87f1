// Package valkeytargets registers the Valkey backends with package bench —
// "valkey", the server holding the stock (flag -valkey-addr), and
// "valkey-redlock", the other Redlock voters (private valkey-servers) — and
// every Redis strategy of package redistargets again on them, named
// valkey-… instead of redis-… (valkey-atomic, valkey-redlock, …). They run
// only when -strategies names them (valkey-*).
//
// Targets find a redis.UniversalClient under "valkey" and a
// []redis.UniversalClient under "valkey-redlock" in bench.Servers.
package valkeytargets

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/internal/backends"
)

// The backends' names in targets' Needs and in bench.Servers.
const (
	Name        = "valkey"
	RedlockName = "valkey-redlock"
)

// Backend is the Valkey server holding the stock: the one -valkey-addr
// names, else the one package backends resolves (STOCKGUARD_VALKEY_ADDR,
// else a private valkey-server from PATH, else Docker in a binary that has
// it). It is opened as the Redis backend opens its server.
var Backend = bench.Backend{
	Name:  Name,
	About: "Valkey holding the stock: -valkey-addr, else STOCKGUARD_VALKEY_ADDR, else a private valkey-server from PATH",
	Flags: func(fs *flag.FlagSet) bench.Opener {
		addr := fs.String("valkey-addr", "", "Valkey address host:port (default: resolved, see Backends)")
		return bench.Opener{
			Check: func() error {
				if *addr != "" && !strings.Contains(*addr, ":") {
					return fmt.Errorf("-valkey-addr %q: want host:port", *addr)
				}
				return nil
			},
			Open: func(ctx context.Context, oc bench.OpenConfig) (*bench.Opened, error) {
				source, stop := "-valkey-addr", func() error { return nil }
				a := *addr
				if a == "" {
					r, err := backends.ResolveValkey(ctx)
					if err != nil {
						return nil, err
					}
					a, source, stop = r.Addr, string(r.Source), r.Close
				}
				return reopen(ctx, redistargets.Backend, "redis-addr", a, oc, Name, source, stop, "-valkey-addr")
			},
		}
	},
}

// RedlockBackend is the Redlock voters besides the stock's Valkey: the
// servers -valkey-redlock-addrs names, else private valkey-servers, never
// the stock's server nor each other.
var RedlockBackend = bench.Backend{
	Name:  RedlockName,
	About: fmt.Sprintf("the %d other Redlock voters of valkey-redlock: -valkey-redlock-addrs, else private valkey-servers from PATH", redistargets.RedlockVoters-1),
	Flags: func(fs *flag.FlagSet) bench.Opener {
		list := fs.String("valkey-redlock-addrs", "", fmt.Sprintf("the %d Valkey servers, host:port comma-separated, that valkey-redlock locks on besides -valkey-addr (default: private valkey-servers)", redistargets.RedlockVoters-1))
		return bench.Opener{Open: func(ctx context.Context, oc bench.OpenConfig) (*bench.Opened, error) {
			if *list != "" {
				return reopen(ctx, redistargets.RedlockBackend, "redlock-addrs", *list, oc,
					RedlockName, "-valkey-redlock-addrs", func() error { return nil }, "-valkey-redlock-addrs")
			}
			var addrs []string
			var stops []func() error
			stop := func() error {
				var errs []error
				for _, s := range stops {
					errs = append(errs, s())
				}
				return errors.Join(errs...)
			}
			for range redistargets.RedlockVoters - 1 {
				r, err := backends.StartLocalValkey(ctx)
				if err != nil {
					stop()
					return nil, fmt.Errorf("valkey redlock voters: %w", err)
				}
				addrs, stops = append(addrs, r.Addr), append(stops, r.Close)
			}
			return reopen(ctx, redistargets.RedlockBackend, "redlock-addrs", strings.Join(addrs, ","), oc,
				RedlockName, string(backends.SourceLocal), stop, "-valkey-redlock-addrs")
		}}
	},
}

// reopen opens the servers at value through b's opener, its flag set to
// value, and names them backend, found through source; stop runs at Close
// (or at once when opening fails). ownFlag is the flag of backend that
// names the same servers in another process (Opened.Args).
func reopen(ctx context.Context, b bench.Backend, flagName, value string, oc bench.OpenConfig, backend, source string, stop func() error, ownFlag string) (*bench.Opened, error) {
	fs := flag.NewFlagSet(backend, flag.ContinueOnError)
	opener := b.Flags(fs)
	if err := fs.Set(flagName, value); err != nil {
		stop()
		return nil, err
	}
	o, err := opener.Open(ctx, oc)
	if err != nil {
		stop()
		return nil, fmt.Errorf("%s: %w", backend, err)
	}
	for i := range o.Servers {
		o.Servers[i].Backend, o.Servers[i].Source = backend, source
	}
	o.Args = []string{ownFlag, value}
	closeConns := o.Close
	o.Close = func() error { return errors.Join(closeConns(), stop()) }
	return o, nil
}

func init() {
	bench.RegisterBackend(Backend)
	bench.RegisterBackend(RedlockBackend)
	rename := map[string]string{redistargets.Name: Name, redistargets.RedlockName: RedlockName}
	for _, t := range bench.Targets() {
		if len(t.Needs) == 0 || t.Needs[0] != redistargets.Name || t.OnRequest {
			continue
		}
		if name, ok := strings.CutPrefix(t.Name, redistargets.Name+"-"); ok {
			bench.Register(bench.Variant(t, Name+"-"+name, rename))
		}
	}
}
