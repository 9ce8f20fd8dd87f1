package faults

import (
	"context"

	"github.com/stockguard/stockguard/internal/backends"
)

// topology is a deployment with replicas and automatic failover, as the
// failover faults strike it: the private Sentinel topology or the private
// Cluster with replicas, each node behind a Link.
type topology interface {
	// master returns the node to strike: the Sentinels' master, the
	// Cluster's master holding the most keys.
	master(ctx context.Context) (node, error)
	// waitPromoted waits until another node has taken old's place.
	waitPromoted(ctx context.Context, old node) error
	// restore brings old back (restarted if killed) as a replica and waits
	// until the deployment is healthy again.
	restore(ctx context.Context, old node) error
	// partial reports whether a struck master is only part of the
	// deployment: on Cluster the other masters still serve their keys
	// (and a lock held there is rightly busy), so the deployment is never
	// "down" for the check that a server down is reported unavailable.
	partial() bool
}

// node is a data node a failover fault strikes: its process, and the Link
// its replicas (and Sentinels) reach it through.
type node struct {
	proc *backends.Process
	link *backends.Link
	key  any // the topology's own handle
}

// sentinelTopo is the Sentinel topology: the Sentinels elect the most
// advanced replica.
type sentinelTopo struct{ s *backends.Sentinel }

func (t sentinelTopo) master(ctx context.Context) (node, error) {
	m, err := t.s.Master(ctx)
	if err != nil {
		return node{}, err
	}
	return node{proc: m.Proc, link: m.Link, key: m}, nil
}

func (t sentinelTopo) waitPromoted(ctx context.Context, old node) error {
	_, err := t.s.WaitPromoted(ctx, old.link.Addr)
	return err
}

func (t sentinelTopo) restore(ctx context.Context, old node) error {
	return t.s.Restore(ctx, old.key.(*backends.SentinelNode))
}

func (sentinelTopo) partial() bool { return false }

// clusterTopo is the Cluster with replicas: the masters elect the failed
// master's replica once it has not answered the bus for
// backends.ClusterNodeTimeout.
type clusterTopo struct{ c *backends.Cluster }

func (t clusterTopo) master(ctx context.Context) (node, error) {
	m, err := t.c.Busiest(ctx)
	if err != nil {
		return node{}, err
	}
	return node{proc: m.Proc, link: t.c.Link(m), key: m}, nil
}

func (t clusterTopo) waitPromoted(ctx context.Context, old node) error {
	return t.c.WaitPromoted(ctx, old.key.(*backends.Redis))
}

func (t clusterTopo) restore(ctx context.Context, old node) error {
	return t.c.Restore(ctx, old.key.(*backends.Redis))
}

func (clusterTopo) partial() bool { return true }
