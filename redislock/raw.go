package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
)

// RawStock reads sku's stock straight from its keys — the segment count in
// the meta hash, then every segment's level — with plain HGET and GET,
// bypassing the scripts, the gather lock and the consistency checks of
// Stock. It is for audits that must not take Stock's word for it (package
// bench); call it only while no request for sku runs. Units held by an
// unfinished gather are not counted. Its errors wrap
// stockguard.ErrUnknownSKU (no segment count, or a segment missing) or are
// Redis's own, unclassified; a key holding something other than an integer
// is reported as such.
func (s *Segmented) RawStock(ctx context.Context, sku string) (int64, error) {
	meta := s.metaKey(sku)
	n, err := s.rdb.HGet(ctx, meta, "n").Int()
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w: no segment count in %q", stockguard.ErrUnknownSKU, meta)
	}
	if err != nil {
		return 0, fmt.Errorf("redislock: %q: %w", meta, err)
	}
	var total int64
	for i := range n {
		key := s.segKey(sku, i)
		v, err := s.rdb.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("%w: no segment %q", stockguard.ErrUnknownSKU, key)
		}
		if err != nil {
			return 0, fmt.Errorf("redislock: %q: %w", key, err)
		}
		level, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("redislock: segment %q holds %q, not an integer", key, v)
		}
		total += level
	}
	return total, nil
}
