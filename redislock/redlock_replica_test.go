package redislock

import (
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
)

// envReplicas is bench's STOCKGUARD_REPLICAS: "full" runs the tests that
// start a replicated master per Redlock voter (CI does, once).
const envReplicas = "STOCKGUARD_REPLICAS"

// replicatedVoters starts n voters, each a master with one replica in
// sync, and returns them with a client on each master.
func replicatedVoters(t *testing.T, n int) ([]*backends.Replicated, []redis.UniversalClient) {
	t.Helper()
	if os.Getenv(envReplicas) != "full" {
		t.Skipf("%s=full starts a master and a replica per voter", envReplicas)
	}
	voters := make([]*backends.Replicated, n)
	clients := make([]redis.UniversalClient, n)
	for i := range voters {
		voters[i] = backendstest.PrivateReplicated(t, 1)
		c := voters[i].Client()
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	return voters, clients
}

// TestRedlockGuarded_replicaAckConformance: Redlock-guarded stock over
// three voters with replicas, every vote and write acknowledged by the
// voter's replica, passes the conformance suite.
func TestRedlockGuarded_replicaAckConformance(t *testing.T) {
	_, clients := replicatedVoters(t, 3)
	prefix := lockPrefix(t)
	// Few buyers: each take is a lock round on three voters, each vote,
	// write and release waiting for a replica.
	stocktest.Suite{Goroutines: 8, Stock: 60, SKUs: 4}.Run(t, func(t *testing.T) stockguard.Inventory {
		return must.New(NewRedlockGuarded(clients, WithPrefix(prefix), WithNodeTimeout(2*time.Second), WithReplicaAck(1, time.Second)))
	})
}
