package redislock

import (
	"testing"
	"time"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/stocktest"
)

// TestRedlockGuarded_replicaAckConformance: Redlock-guarded stock over
// three voters with replicas, every vote and write acknowledged by the
// voter's replica, passes the conformance suite.
func TestRedlockGuarded_replicaAckConformance(t *testing.T) {
	_, clients := backendstest.ReplicatedVoters(t, 3)
	prefix := lockPrefix(t)
	// Few buyers: each take is a lock round on three voters, each vote,
	// write and release waiting for a replica.
	stocktest.Suite{Goroutines: 8, Stock: 60, SKUs: 4}.Run(t, func(t *testing.T) stockguard.Inventory {
		return must.New(NewRedlockGuarded(clients, WithPrefix(prefix), WithNodeTimeout(2*time.Second), WithReplicaAck(1, time.Second)))
	})
}
