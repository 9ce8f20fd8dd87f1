package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/internal/backends"
)

// servers are the connections a run uses and the private servers started
// for it.
type servers struct {
	backends bench.Backends
	desc     []string // one line per server, for the report
	closers  []func() error
}

// Close closes the connections, then stops the servers this run started.
func (s *servers) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// resolveTimeout bounds finding or starting one server (a Docker pull
// included).
const resolveTimeout = 3 * time.Minute

// openServers connects to the servers the targets need: the flags' if
// given, else those the backends package resolves (starting private servers
// when it must). Pools are sized for maxWorkers.
func openServers(ctx context.Context, c config, maxWorkers int) (*servers, error) {
	var need bench.Need
	for _, t := range c.targets {
		need |= t.Needs
	}
	pool := max(2*maxWorkers, 64) + 16
	var (
		mu  sync.Mutex
		s   = &servers{}
		wg  sync.WaitGroup
		err [3]error
	)
	// Each goroutine registers its closers under mu, in the order of
	// creation, so that Close stops clients before their servers.
	add := func(desc string, closers ...func() error) {
		mu.Lock()
		defer mu.Unlock()
		if desc != "" {
			s.desc = append(s.desc, desc)
		}
		s.closers = append(s.closers, closers...)
	}
	if need&bench.NeedMySQL != 0 {
		wg.Go(func() { s.backends.DB, err[0] = openMySQL(ctx, c.mysqlDSN, pool, add) })
	}
	if need&bench.NeedRedis != 0 {
		wg.Go(func() { s.backends.Redis, err[1] = openRedis(ctx, c.redisAddr, pool, add) })
	}
	if need&bench.NeedRedlock != 0 {
		wg.Go(func() { s.backends.RedlockMasters, err[2] = openRedlockMasters(ctx, c.redlockAddrs, pool, add) })
	}
	wg.Wait()
	if e := errors.Join(err[:]...); e != nil {
		s.Close()
		return nil, e
	}
	return s, nil
}

func openMySQL(ctx context.Context, dsn string, pool int, add func(string, ...func() error)) (*sqlx.DB, error) {
	source := "-mysql-dsn"
	if dsn == "" {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		m, err := backends.ResolveMySQL(rctx)
		cancel()
		if err != nil {
			return nil, err
		}
		add("", m.Close)
		dsn, source = m.DSN, string(m.Source)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	// Client-side interpolation saves a prepare round trip per statement;
	// stockguard recommends it, so the benchmark measures with it unless
	// the DSN says otherwise.
	if !strings.Contains(dsn, "interpolateParams=") {
		cfg.InterpolateParams = true
	}
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	add("", db.Close)
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	var version string
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.QueryRowContext(pctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("mysql at %s: %w", cfg.Addr, err)
	}
	add(fmt.Sprintf("MySQL %s at %s (%s)", version, cfg.Addr, source))
	return db, nil
}

func openRedis(ctx context.Context, addr string, pool int, add func(string, ...func() error)) (redis.UniversalClient, error) {
	source := "-redis-addr"
	if addr == "" {
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		r, err := backends.ResolveRedis(rctx)
		cancel()
		if err != nil {
			return nil, err
		}
		add("", r.Close)
		addr, source = r.Addr, string(r.Source)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: pool})
	add("", rdb.Close)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := rdb.Info(pctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	version := "?"
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			version = v
		}
	}
	add(fmt.Sprintf("Redis %s at %s (%s)", version, addr, source))
	return rdb, nil
}

// openRedlockMasters connects to the Redlock voters besides the stock's
// Redis: addrs, else private redis-servers started here. Redlock's cost is
// waiting for independent processes, so they are never the same server.
func openRedlockMasters(ctx context.Context, addrs []string, pool int, add func(string, ...func() error)) ([]redis.UniversalClient, error) {
	source := "-redlock-addrs"
	if len(addrs) == 0 {
		source = string(backends.SourceLocal)
		for range bench.RedlockVoters - 1 {
			r, err := backends.StartLocalRedis(ctx)
			if err != nil {
				return nil, fmt.Errorf("redlock voters: %w", err)
			}
			add("", r.Close)
			addrs = append(addrs, r.Addr)
		}
	}
	var masters []redis.UniversalClient
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a, PoolSize: pool})
		add("", rdb.Close)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("redlock voter at %s: %w", a, err)
		}
		masters = append(masters, rdb)
	}
	add(fmt.Sprintf("Redlock voters: Redis at %s (%s)", strings.Join(addrs, ", "), source))
	return masters, nil
}
