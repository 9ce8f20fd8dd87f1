package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/redislock"
)

// A take that must survive a failover: acknowledged only once a replica
// has it. Behind Sentinel, through go-redis's own failover client.
func ExampleWithReplicaAck() {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "mymaster",
		SentinelAddrs: []string{"127.0.0.1:26379", "127.0.0.1:26380", "127.0.0.1:26381"},
	})
	defer rdb.Close()
	// WAIT 1 250 after every write, pipelined on the write's connection.
	inv, err := redislock.NewAtomic(rdb, redislock.WithReplicaAck(1, 250*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}

	switch err := inv.Decrement(context.Background(), "sku-42", 1); {
	case err == nil:
		fmt.Println("taken, and on a replica")
	case errors.Is(err, stockguard.ErrOutcomeUnknown):
		// Applied on the master, not confirmed by a replica in time: it may
		// or may not survive a failover. Take orders with an ID (Orders) and
		// repeat the call, or reconcile, before answering the buyer.
		fmt.Println("unconfirmed:", err)
	default:
		fmt.Println("nothing was taken:", err)
	}
}
