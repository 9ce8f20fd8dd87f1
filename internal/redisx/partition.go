package redisx

import "context"

// partitionCtx is the context key of a call's partition.
type partitionCtx struct{}

// WithPartition returns ctx carrying p, the partition of the calls made
// under it: a batching strategy combines only calls of one partition, and
// runs each batch under a context carrying it, so that a client which
// rewrites calls by it (a fence on the calls' epoch) sees a batch as it
// sees each of its calls.
func WithPartition(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, partitionCtx{}, p)
}

// Partition returns the partition ctx carries: "" for none.
func Partition(ctx context.Context) string {
	p, _ := ctx.Value(partitionCtx{}).(string)
	return p
}
