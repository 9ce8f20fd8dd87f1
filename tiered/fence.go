package tiered

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/rediskeys"
)

// The front's epoch key holds one of:
//
//	<hex>               the armed epoch: the front sells;
//	recovering:<hex>    Recover runs under that token: only its own calls
//	                    pass;
//	(missing)           the front lost its data.
const recovering = "recovering:"

// seenCode starts the error reply of a front script on an order ID the
// front forgot (past its order retention) and the back applied:
// "TIEREDSEEN <record key>".
const seenCode = "TIEREDSEEN"

// fenceCode starts the error reply of a front script refused by its epoch
// check: "TIEREDFENCE <the value found>".
const fenceCode = "TIEREDFENCE"

// fencedClient is the front's Redis client as the front's redislock.Atomic
// sees it: every script the Atomic runs (EVAL, EVALSHA) is sent with a
// prelude that compares the epoch key with the value its context carries
// (withEpoch; none matches no value), in the same script, and answers the error reply fenceCode without running the
// script when they differ. A call of the front therefore applies under the
// epoch its caller read, or not at all: a front lost and recovered since
// (a new epoch), or being recovered, refuses it. Everything else passes
// through.
//
// The Atomic sends a script by EVALSHA of its own source's digest, then
// EVAL of the source on NOSCRIPT (redis.Script.Run). fencedClient answers
// NOSCRIPT, without sending, to an EVALSHA whose source it has not seen,
// learns the source from the EVAL that follows, and from then on sends
// EVALSHA of the fenced source (EVAL of it when Redis lost its script
// cache).
type fencedClient struct {
	redis.UniversalClient
	key     string // the epoch key
	ids     string // the set of the record keys of IDs the back applied (IDsKey)
	records string // how an order record's key starts: "<prefix>order:{"

	mu      sync.Mutex
	sources map[string]string    // digest of a script → its source
	fenced  map[[2]string]script // (digest, epoch) → the fenced script
}

// script is a fenced script's source and digest.
type script struct{ src, sha string }

func newFencedClient(rdb redis.UniversalClient, stream, prefix string) *fencedClient {
	return &fencedClient{UniversalClient: rdb, key: EpochKey(stream), ids: IDsKey(stream), records: recordKeys(prefix).Name("order", ""), sources: map[string]string{}, fenced: map[[2]string]script{}}
}

// Process sends cmd, an EVAL or EVALSHA fenced.
func (c *fencedClient) Process(ctx context.Context, cmd redis.Cmder) error {
	if !c.rewrite(ctx, cmd) {
		return cmd.Err()
	}
	return c.UniversalClient.Process(ctx, cmd)
}

// Pipeline returns a pipeline whose EVAL and EVALSHA are fenced (the
// Atomic's writes go through one when they wait for replicas).
func (c *fencedClient) Pipeline() redis.Pipeliner {
	return fencedPipeline{Pipeliner: c.UniversalClient.Pipeline(), c: c}
}

type fencedPipeline struct {
	redis.Pipeliner
	c *fencedClient
}

func (p fencedPipeline) Process(ctx context.Context, cmd redis.Cmder) error {
	if !p.c.rewrite(ctx, cmd) {
		return cmd.Err()
	}
	return p.Pipeliner.Process(ctx, cmd)
}

// rewrite turns cmd, when it runs a script, into the fenced script's
// EVALSHA or EVAL, in place (the same arguments after it). It returns false
// when cmd must not be sent: an EVALSHA of a source not seen yet, answered
// NOSCRIPT so that the EVAL of the source follows.
func (c *fencedClient) rewrite(ctx context.Context, cmd redis.Cmder) bool {
	args := cmd.Args()
	name := strings.ToLower(cmd.Name())
	if (name != "eval" && name != "evalsha") || len(args) < 2 {
		return true
	}
	payload, _ := args[1].(string)
	epoch, _ := ctx.Value(epochCtx{}).(string)
	c.mu.Lock()
	defer c.mu.Unlock()
	digest := payload
	if name == "eval" {
		digest = sha1Hex(payload)
		c.sources[digest] = payload
	}
	f, ok := c.fenced[[2]string{digest, epoch}]
	if !ok {
		src, known := c.sources[digest]
		if !known {
			cmd.SetErr(redis.ErrNoScript)
			return false
		}
		f.src = fencePrelude(c.key, epoch, c.ids, strings.TrimSuffix(c.records, "}")) + src
		f.sha = sha1Hex(f.src)
		c.fenced[[2]string{digest, epoch}] = f
	}
	if name == "eval" {
		args[1] = f.src
	} else {
		args[1] = f.sha
	}
	return true
}

// epochCtx is the context key of the epoch a front call carries.
type epochCtx struct{}

// withEpoch returns ctx carrying epoch: the value the epoch key must hold
// for the front's scripts run under ctx to apply.
func withEpoch(ctx context.Context, epoch string) context.Context {
	return context.WithValue(ctx, epochCtx{}, epoch)
}

// fencePrelude is the Lua that refuses a script unless the epoch key holds
// epoch (a key never holds "", so a call that carries no epoch is refused),
// and a script on an order record (its first key starts with records) that
// the front no longer has but whose ID the back applied (listed in the set
// ids), answering seenCode: the ID is not the front's to apply afresh. It
// reads keys without declaring them: the front is one Redis (New refuses a
// Cluster), where a script may read any key.
func fencePrelude(key, epoch, ids, records string) string {
	return "local tiered_epoch = redis.call('GET', " + luaString(key) + ")\n" +
		"if tiered_epoch ~= " + luaString(epoch) + " then\n" +
		"  return redis.error_reply('" + fenceCode + " ' .. tostring(tiered_epoch))\n" +
		"end\n" +
		"if KEYS[1] and string.sub(KEYS[1], 1, " + fmt.Sprint(len(records)) + ") == " + luaString(records) +
		" and redis.call('EXISTS', KEYS[1]) == 0 and redis.call('SISMEMBER', " + luaString(ids) + ", KEYS[1]) == 1 then\n" +
		"  return redis.error_reply('" + seenCode + " ' .. KEYS[1])\n" +
		"end\n"
}

// luaString is s as a Lua string literal: every byte other than a letter
// or digit as a decimal escape.
func luaString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' {
			b.WriteByte(ch)
			continue
		}
		fmt.Fprintf(&b, "\\%03d", ch) // three digits: a digit after it is not read into it
	}
	b.WriteByte('\'')
	return b.String()
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// fenced reports whether err is a front script's refusal by its epoch
// check, and the value it found ("false" when the key is missing).
func fenced(err error) (found string, ok bool) {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return "", false
	}
	// Redis puts ERR in front of a reply whose first word is not a code it
	// knows (Valkey too); KVRocks in front of any.
	return strings.CutPrefix(strings.TrimPrefix(reply.Error(), "ERR "), fenceCode+" ")
}

// seen reports whether err is a front script's refusal of an ID the front
// forgot and the back applied.
func seen(err error) bool {
	return redis.HasErrorPrefix(err, seenCode+" ")
}

// recordKeys are the keys of the front's order records under prefix, as
// redislock names them ("<prefix>order:{<id>}").
func recordKeys(prefix string) rediskeys.Keys { return rediskeys.Keys{Prefix: prefix} }

// IDsKey is the set, next to stream, of the order records' keys of every
// order and restock ID the back applied: "<stream>:ids". The front refuses
// to apply afresh an ID it forgot (past redislock.WithOrderRetention) while
// the set has it. Consumers add an order's when they acknowledge its take,
// Restock a restock's, Recover those it is given.
func IDsKey(stream string) string { return stream + ":ids" }
