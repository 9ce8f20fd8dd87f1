package backends

import "testing"

// TestResolveReplicatedCluster_everySlotHasAReplica resolves a private
// cluster with replicas and checks that every slot range lists one, as a
// failover needs.
func TestResolveReplicatedCluster_everySlotHasAReplica(t *testing.T) {
	skipShort(t)
	t.Setenv(EnvBackend, string(SourceLocal))
	c, err := ResolveReplicatedCluster(t.Context())
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { c.Close() })
	if err := clusterHasReplicas(t.Context(), c); err != nil {
		t.Fatal(err)
	}
}
