package lock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed reentrant_obtain.lua
	reentrantObtainLua string
	//go:embed reentrant_release.lua
	reentrantReleaseLua string
	//go:embed reentrant_refresh.lua
	reentrantRefreshLua string
	//go:embed reentrant_pttl.lua
	reentrantPTTLLua string

	reentrantObtainScript  = redis.NewScript(reentrantObtainLua)
	reentrantReleaseScript = redis.NewScript(reentrantReleaseLua)
	reentrantRefreshScript = redis.NewScript(reentrantRefreshLua)
	reentrantPTTLScript    = redis.NewScript(reentrantPTTLLua)
)

// Owner identifies the holder of reentrant locks: a request, a job, a
// session — whatever must be able to take a lock it already holds. Go has
// no thread identity to borrow (and goroutine IDs would be wrong anyway:
// work moves between goroutines), so the owner is explicit: create one with
// NewOwner and pass it down, e.g. in your own context value. An Owner is a
// 128-bit random value; it may be copied, compared and shared freely, also
// across processes (String).
type Owner struct{ id string }

// NewOwner returns a new, unique Owner.
func NewOwner() Owner { return Owner{id: newToken()} }

// String returns the owner's identity as stored in Redis.
func (o Owner) String() string { return o.id }

// Reentrant makes Obtain take a reentrant lock held by owner. The lock is a
// Redis hash "owner → hold count" (Redisson's layout): when owner already
// holds the lock, Obtain succeeds at once and adds one hold (never
// shortening the lease), and each handle's Release takes one away; the key
// is deleted, and waiters told, when the count reaches zero. Another owner
// can neither obtain, release nor extend it. A plain lock and a reentrant
// one on the same key exclude each other.
//
// Nested acquisitions return the same fencing token as the outermost one:
// the owner is one holder as far as the resource is concerned, and its
// writes must not fence each other off. Default: not reentrant, each
// Obtain is its own owner.
func Reentrant(owner Owner) ObtainOption {
	return func(o *obtainOptions) { o.reentrant, o.owner = true, owner }
}
