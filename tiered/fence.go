package tiered

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/internal/redisx"
)

// The front's epoch key holds one of:
//
//	<hex>               the armed epoch: the front sells;
//	recovering:<hex>    Recover runs under that token: only its own calls
//	                    pass;
//	(missing)           the front lost its data.
const recovering = "recovering:"

// seenCode starts the error reply of a front script on order IDs the
// front forgot (past its order retention) and the back applied:
// "TIEREDSEEN <record key>", the keys separated by seenSep.
const seenCode = "TIEREDSEEN"

// fenceCode starts the error reply of a front script refused by its epoch
// check: "TIEREDFENCE <the value found>".
const fenceCode = "TIEREDFENCE"

// fencedClient is the front's Redis client as the front's redislock.Batched
// sees it: every script the front runs (EVAL, EVALSHA) is sent with a
// prelude that compares the epoch key with the value its context carries
// (withEpoch; none matches no value), in the same script, and answers the
// error reply fenceCode without running the script when they differ. A
// call of the front therefore applies under the epoch its caller read, or
// not at all: a front lost and recovered since (a new epoch), or being
// recovered, refuses it. A script call that carries several orders (a
// batch) carries the one epoch of its orders' callers. Everything else
// passes through.
//
// The front sends a script by EVALSHA of its own source's digest, then
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
	epoch := redisx.Partition(ctx)
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

// withEpoch returns ctx carrying epoch: the value the epoch key must hold
// for the front's scripts run under ctx to apply. It is the calls'
// partition, so that the front combines only calls of one epoch into a
// script call (see redislock.Batched), which carries it.
func withEpoch(ctx context.Context, epoch string) context.Context {
	return redisx.WithPartition(ctx, epoch)
}

// fencePrelude is the Lua that refuses a script unless the epoch key holds
// epoch (a key never holds "", so a call that carries no epoch is refused),
// and a script on order records (keys that start with records: one, or a
// batch's) of which one the front no longer has but whose ID the back
// applied (listed in the set ids), answering seenCode and every such
// record key: the ID is not the front's to apply afresh, and the call —
// the other orders of its batch too — applied nothing. It reads keys
// without declaring them: the front is one Redis (New refuses a Cluster),
// where a script may read any key.
func fencePrelude(key, epoch, ids, records string) string {
	return "local tiered_epoch = redis.call('GET', " + luaString(key) + ")\n" +
		"if tiered_epoch ~= " + luaString(epoch) + " then\n" +
		"  return redis.error_reply('" + fenceCode + " ' .. tostring(tiered_epoch))\n" +
		"end\n" +
		"local tiered_recs = {}\n" +
		"local tiered_find = string.find\n" +
		"for i = 1, #KEYS do\n" +
		"  local k = KEYS[i]\n" +
		"  if tiered_find(k, " + luaString(records) + ", 1, true) == 1 then\n" +
		"    tiered_recs[#tiered_recs + 1] = k\n" +
		"  end\n" +
		"end\n" +
		"if #tiered_recs > 0 then\n" +
		"  local listed, seen = redis.call('SMISMEMBER', " + luaString(ids) + ", unpack(tiered_recs)), {}\n" +
		"  for i, k in ipairs(tiered_recs) do\n" +
		"    if listed[i] == 1 and redis.call('EXISTS', k) == 0 then\n" +
		"      seen[#seen + 1] = k\n" +
		"    end\n" +
		"  end\n" +
		"  if #seen > 0 then\n" +
		"    return redis.error_reply('" + seenCode + " ' .. table.concat(seen, '\\031'))\n" +
		"  end\n" +
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
	return replyOf(err, fenceCode)
}

// replyOf reports whether err is a front script's error reply starting
// with code, and the text after it.
func replyOf(err error, code string) (string, bool) {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return "", false
	}
	// Redis puts ERR in front of a reply whose first word is not a code it
	// knows (Valkey too); KVRocks in front of any.
	return strings.CutPrefix(strings.TrimPrefix(reply.Error(), "ERR "), code+" ")
}

// seen reports whether err is a front script's refusal of an ID the front
// forgot and the back applied, and the record keys of those IDs.
func seen(err error) ([]string, bool) {
	keys, ok := replyOf(err, seenCode)
	if !ok {
		return nil, false
	}
	return strings.Split(keys, seenSep), true
}

// forgot reports whether err is the front's refusal of id as an ID it
// forgot and the back applied.
func (o *Orders) forgot(err error, id string) bool {
	keys, ok := seen(err)
	return ok && slices.Contains(keys, o.recordKey(id))
}

// recordKey is the key of id's order record on the front.
func (o *Orders) recordKey(id string) string { return recordKeys(o.prefix).Name("order", id) }

// seenSep separates the record keys of a seenCode reply: a control
// character, which no order ID holds (strategy.ValidateID).
const seenSep = "\x1f"

// recordKeys are the keys of the front's order records under prefix, as
// redislock names them ("<prefix>order:{<id>}").
func recordKeys(prefix string) rediskeys.Keys { return rediskeys.Keys{Prefix: prefix} }

// IDsKey is the set, next to stream, of the order records' keys of every
// order and restock ID the back applied: "<stream>:ids". The front refuses
// to apply afresh an ID it forgot (past redislock.WithOrderRetention) while
// the set has it. Consumers add an order's when they acknowledge its take,
// Restock a restock's, Recover those it is given.
func IDsKey(stream string) string { return stream + ":ids" }
