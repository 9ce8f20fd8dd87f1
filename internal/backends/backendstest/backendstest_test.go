package backendstest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { Main(m) }

func TestDB_pingsSharedMySQL(t *testing.T) {
	db := DB(t)
	start := time.Now()
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	m := SharedMySQL(t)
	t.Logf("mysql %s via %s, ping %v", m.DSN, m.Source, time.Since(start))
}

func TestSharedRedis_isShared(t *testing.T) {
	a, b := SharedRedis(t), SharedRedis(t)
	if a != b {
		t.Fatalf("two servers: %s and %s", a.Addr, b.Addr)
	}
	if err := RedisClient(t).Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestPrivateCluster_routesKeysAcrossMasters(t *testing.T) {
	c := PrivateCluster(t, 3)
	cl := c.Client()
	defer cl.Close()
	ctx := t.Context()
	for i := range 30 {
		if err := cl.Set(ctx, "k"+string(rune('a'+i)), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var masters atomic.Int32 // ForEachMaster calls back concurrently
	err := cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if n > 0 {
			masters.Add(1)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if masters.Load() != 3 {
		t.Fatalf("keys landed on %d of 3 masters", masters.Load())
	}
}
