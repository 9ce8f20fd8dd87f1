// Package tieredtargets registers the tiered targets with package bench:
// package tiered's Orders with Redis in front and a durable Orders behind,
// joined by a Redis Stream. It needs the backends of redistargets and
// mysqltargets ("redis", "mysql"); -durable makes the MySQL back flush at
// every commit. tiered-sentinel-mysql-ack and tiered-sentinel-mysql put
// replicatargets' Sentinel topology in front, with and without
// tiered.WithReplicaAck: they run only when named, or under the faults
// of replicas (failover, partition-master).
//
// A target's store is a key prefix on Redis and a mysqllock table, with
// one tiered.Consumer running for the store's life in the process that
// opened it; a run split over processes (bench.Stock) hands it off, and
// the caller runs consumers of the same group where it chooses
// (bench.Store.Consume: stockbench -procs, in consumer processes). The audit's raw reading waits until the stream is drained and
// then reads the back's table with its own SELECT: the back must hold
// every acknowledged order, exactly once.
package tieredtargets
