package backends

import (
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestStartLocalTiDB starts a private TiDB (needs STOCKGUARD_TIDB=1, as
// every TiDB test: see backendstest.EnvTiDB), asks it what it is, and
// checks that Close leaves nothing behind.
func TestStartLocalTiDB(t *testing.T) {
	skipShort(t)
	if v := os.Getenv("STOCKGUARD_TIDB"); v == "" || v == "0" {
		t.Skip("needs TiDB: set STOCKGUARD_TIDB=1 (and build tidb-server: scripts/build-tidb.sh)")
	}
	m, err := StartLocalTiDB(t.Context())
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { m.Close() })
	db, err := sql.Open("mysql", m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var version string
	if err := db.QueryRowContext(t.Context(), "SELECT tidb_version()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(version, "Store: unistore") {
		t.Errorf("tidb_version() = %q, want the unistore engine", version)
	}
	dir := m.Proc.Dir
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s left behind: %v", dir, err)
	}
}

// TestStartLocalValkey starts a private Valkey and a 3-master Valkey
// Cluster and checks each one says it is Valkey.
func TestStartLocalValkey(t *testing.T) {
	skipShort(t)
	ctx := t.Context()
	r, err := StartLocalValkey(ctx)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { r.Close() })
	c, err := StartLocalValkeyCluster(ctx, 3)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() { c.Close() })
	clients := []redis.UniversalClient{r.Client(), c.Client()}
	for _, rdb := range clients {
		t.Cleanup(func() { rdb.Close() })
		info, err := rdb.Info(ctx, "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(info, "server_name:valkey") {
			t.Errorf("INFO server does not say valkey:\n%s", info)
		}
	}
	if err := clients[1].Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("cluster SET: %v", err)
	}
	if !strings.HasPrefix(r.Proc.Dir, os.TempDir()+"/stockguard-valkey-") {
		t.Errorf("temp dir %s is not named stockguard-valkey-*: the CI check for leftovers would miss it", r.Proc.Dir)
	}
}
