// Package redistargets registers the Redis backends with package bench —
// "redis", the server holding the stock (flag -redis-addr), and "redlock",
// the other voters of a Redlock quorum (flag -redlock-addrs) — and the
// targets that keep their stock in Redis: redislock's and watchtx's
// strategies and the Redis counterexamples. Each target's store is the keys
// under a prefix named after the run, deleted afterwards, and the audit
// reads them back itself.
//
// Targets find a redis.UniversalClient under "redis" and a
// []redis.UniversalClient of RedlockVoters-1 clients under "redlock" in
// bench.Servers.
package redistargets
