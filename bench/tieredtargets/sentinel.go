package tieredtargets

import (
	"github.com/stockguard/stockguard/bench"
	"github.com/stockguard/stockguard/bench/redistargets"
	"github.com/stockguard/stockguard/bench/replicatargets"
	"github.com/stockguard/stockguard/tiered"
)

// The tiered targets whose front is the Sentinel topology
// (replicatargets.SentinelBackend, a go-redis failover client) and whose
// back is MySQL: with a replica's acknowledgement, and without it, the
// counterexample. Like the redis-sentinel-* targets they run only on
// request, or under the faults of replicas (failover, partition-master).
const (
	SentinelMySQLAck = "tiered-sentinel-mysql-ack"
	SentinelMySQL    = "tiered-sentinel-mysql"
)

func init() {
	onSentinel := map[string]string{redistargets.Name: replicatargets.SentinelName}
	ack := target(SentinelMySQLAck,
		"tiered-mysql with a Sentinel-watched master and replica in front; each front write acknowledged, and each entry applied, once a replica has it (tiered.WithReplicaAck(1, 250ms))",
		MySQL, false, tiered.WithReplicaAck(1, replicatargets.AckTimeout))
	bench.Register(bench.OrdersTarget(bench.Variant(ack, SentinelMySQLAck, onSentinel)))
	replicatargets.RegisterAcked(SentinelMySQLAck)
	plain := target(SentinelMySQL,
		"tiered-mysql with a Sentinel-watched master and replica in front; each front write acknowledged once the master applied it",
		MySQL, false)
	bench.Register(bench.OrdersTarget(bench.Variant(plain, SentinelMySQL, onSentinel)))
}
