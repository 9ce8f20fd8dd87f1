package redisx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
)

// Bounds of an Ack. A WAIT for more replicas than MaxAckReplicas, or
// longer than MaxAckTimeout, is a mistake (a count mixed up with a
// duration, seconds with milliseconds), not a deployment: refused, not
// clamped.
const (
	MaxAckReplicas = 100
	MaxAckTimeout  = time.Minute
)

// Ack says what must confirm a write before it counts: WAIT Replicas
// Timeout (replicas that have received it), or, with AOF, WAITAOF Local
// Replicas Timeout (the master's and replicas' append-only files that have
// fsynced it). The zero Ack confirms nothing: writes count once the master
// applied them.
type Ack struct {
	Replicas int
	Local    int // WAITAOF only: 1 to wait for the master's own fsync
	AOF      bool
	Timeout  time.Duration
}

// On reports whether a is more than the zero Ack.
func (a Ack) On() bool { return a != Ack{} }

// Validate returns nil for the zero Ack or a usable one, else why not: for
// WAIT, 1…MaxAckReplicas replicas; for WAITAOF, Local 0 or 1 and Replicas
// 0…MaxAckReplicas, not both 0; a Timeout of whole milliseconds in
// 1ms…MaxAckTimeout (WAIT counts in milliseconds, and 0 would mean
// forever).
func (a Ack) Validate() error {
	if !a.On() {
		return nil
	}
	what := "WithReplicaAck"
	if a.AOF {
		what = "WithAOFAck"
		switch {
		case a.Local != 0 && a.Local != 1:
			return fmt.Errorf("%s: local %d, want 0 or 1 (the master's own fsync)", what, a.Local)
		case a.Replicas < 0 || a.Replicas > MaxAckReplicas:
			return fmt.Errorf("%s: %d replicas, want 0…%d", what, a.Replicas, MaxAckReplicas)
		case a.Local == 0 && a.Replicas == 0:
			return fmt.Errorf("%s: waits for nothing (local 0, replicas 0)", what)
		}
	} else if a.Replicas < 1 || a.Replicas > MaxAckReplicas {
		return fmt.Errorf("%s: %d replicas, want 1…%d", what, a.Replicas, MaxAckReplicas)
	}
	if a.Timeout < time.Millisecond || a.Timeout > MaxAckTimeout || a.Timeout%time.Millisecond != 0 {
		return fmt.Errorf("%s: timeout %v, want whole milliseconds in 1ms…%v", what, a.Timeout, MaxAckTimeout)
	}
	return nil
}

// Then is the ack an option set gives after a, the ack already set, when
// one more ack option sets b: b, or why not — b invalid, b the zero Ack
// (which would wait for nothing), or a second ack option (a set already).
// The packages whose options take WithReplicaAck and WithAOFAck share it,
// so every constructor refuses the same things with the same text.
func (a Ack) Then(b Ack) (Ack, error) {
	switch err := b.Validate(); {
	case a.On():
		return a, errors.New("WithReplicaAck and WithAOFAck given together, or one of them twice")
	case err != nil:
		return a, err
	case !b.On():
		return a, errors.New("an ack of 0 replicas within 0s waits for nothing")
	}
	return b, nil
}

// String describes a for error messages: "WAIT 1 250" or "WAITAOF 1 1 250".
func (a Ack) String() string {
	if a.AOF {
		return fmt.Sprintf("WAITAOF %d %d %d", a.Local, a.Replicas, a.Timeout.Milliseconds())
	}
	return fmt.Sprintf("WAIT %d %d", a.Replicas, a.Timeout.Milliseconds())
}

// command returns the WAIT or WAITAOF command of a.
func (a Ack) command(ctx context.Context) redis.Cmder {
	ms := a.Timeout.Milliseconds()
	if a.AOF {
		return redis.NewIntSliceCmd(ctx, "waitaof", a.Local, a.Replicas, ms)
	}
	return redis.NewIntCmd(ctx, "wait", a.Replicas, ms)
}

// check returns nil if cmd, a's command answered, confirms the write, else
// an *AckError.
func (a Ack) check(cmd redis.Cmder) error {
	e := &AckError{Ack: a, Err: cmd.Err()}
	if e.Err != nil {
		return e
	}
	switch c := cmd.(type) {
	case *redis.IntCmd:
		e.Replicas = int(c.Val())
	case *redis.IntSliceCmd:
		if v := c.Val(); len(v) == 2 {
			e.Local, e.Replicas = int(v[0]), int(v[1])
		}
	}
	if e.Replicas < a.Replicas || e.Local < a.Local {
		return e
	}
	return nil
}

// AckError is the error of a write the master applied but too few
// replicas (or fsyncs) confirmed within the timeout, or whose WAIT failed:
// it wraps stockguard.ErrOutcomeUnknown — the write may survive a failover
// or not. The command's reply is still in the command (Cmd.Val), for
// callers that must undo what it did.
type AckError struct {
	Ack
	Replicas, Local int   // what confirmed it
	Err             error // WAIT's own failure, if it failed
}

func (e *AckError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%v: applied on the master, then %v failed: %v", stockguard.ErrOutcomeUnknown, e.Ack, e.Err)
	}
	if e.AOF {
		return fmt.Sprintf("%v: applied on the master, fsynced by %d of %d local and %d of %d replicas within %v",
			stockguard.ErrOutcomeUnknown, e.Local, e.Ack.Local, e.Replicas, e.Ack.Replicas, e.Timeout)
	}
	return fmt.Sprintf("%v: applied on the master, acknowledged by %d of %d replicas within %v",
		stockguard.ErrOutcomeUnknown, e.Replicas, e.Ack.Replicas, e.Timeout)
}

func (e *AckError) Unwrap() error { return stockguard.ErrOutcomeUnknown }

// NotAcked reports whether err is (or wraps) an *AckError.
func NotAcked(err error) bool {
	var e *AckError
	return errors.As(err, &e)
}

// Acked returns c with every command it sends through Process, Eval or
// EvalSha followed, on the same connection and in the same pipeline (one
// round trip), by a witness write (see witnessKey) and a's WAIT or
// WAITAOF; c itself when a is the zero Ack. When the WAIT confirms, the
// replicas have the command's write and every write it saw. Commands are
// sent at most once (Once).
// A command that succeeded but was not confirmed gets an *AckError instead
// of nil (its reply kept); a command that failed keeps its own error (a
// NOSCRIPT EVALSHA then falls back to EVAL, which is again followed by the
// WAIT). WAIT counts the replicas that have every write the connection
// made so far, so each command is its own write's witness.
//
// On a *redis.ClusterClient the pipeline goes to the master of the
// command's first key (a keyless WAIT sent through the cluster client
// would reach a random node); a MOVED reply, which means the command did
// not run, reloads the slot map and tries again, twice at most. Other
// clients (*redis.Client, a failover client) send a pipeline on one
// connection, so WAIT follows the write where it went.
//
// With AOF, the first command is preceded by one probe of WAITAOF: a
// server without it (Redis before 7.2) or without appendonly (Local 1)
// makes every command fail with stockguard.ErrUnavailable, nothing sent.
//
// Reads go through it only when what they saw must be durable (an order's
// resolution): each costs a witness write and a WAIT. EvalRO, EvalShaRO, ScriptExists and ScriptLoad go to c as they are.
func Acked(c ScriptClient, a Ack) ScriptClient {
	if !a.On() {
		return c
	}
	return &acked{ScriptClient: c, ack: a}
}

type acked struct {
	ScriptClient // EvalRO, EvalShaRO, ScriptExists, ScriptLoad: as they are
	ack          Ack

	mu    sync.Mutex
	probe error // WAITAOF's refusal, once probed; nil until then or when supported
	ok    bool  // WAITAOF probed and supported
}

func (a *acked) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	cmd := evalCmd(ctx, "eval", script, keys, args)
	_ = a.Process(ctx, cmd)
	return cmd
}

func (a *acked) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	cmd := evalCmd(ctx, "evalsha", sha1, keys, args)
	_ = a.Process(ctx, cmd)
	return cmd
}

// Process sends cmd, its witness and the ack command in one pipeline, cmd
// at most once, and returns cmd's error, an *AckError, or the reason
// nothing was sent.
func (a *acked) Process(ctx context.Context, cmd redis.Cmder) error {
	if err := a.probeAOF(ctx); err != nil {
		cmd.SetErr(err)
		return err
	}
	key, keyed := firstKey(cmd)
	var witness, wait redis.Cmder
	for attempt := 0; ; attempt++ {
		p, cluster, err := a.pipeline(ctx, cmd, key, keyed)
		if err != nil {
			cmd.SetErr(err)
			return err
		}
		// At most once, all three: a pipeline resent after a lost reply
		// would find its write done, write nothing, and have its WAIT
		// confirm nothing of it.
		_ = p.Process(ctx, Once(cmd))
		witness = nil
		if keyed {
			witness = redis.NewStatusCmd(ctx, "set", witnessKey(key), "1", "px", witnessTTL.Milliseconds())
			_ = p.Process(ctx, witness)
		}
		wait = a.ack.command(ctx)
		_ = p.Process(ctx, wait)
		_, _ = p.Exec(ctx) // each command carries its own error
		if cluster != nil && attempt < 2 && redis.HasErrorPrefix(cmd.Err(), "MOVED") {
			// The slot moved (resharding, failover): the command did not run.
			cluster.ReloadState(ctx)
			if err := Sleep(ctx, 100*time.Millisecond); err != nil {
				return cmd.Err()
			}
			cmd.SetErr(nil)
			continue
		}
		break
	}
	if err := cmd.Err(); err != nil {
		return err
	}
	if witness != nil && witness.Err() != nil {
		err := &AckError{Ack: a.ack, Err: fmt.Errorf("witness write: %w", witness.Err())}
		cmd.SetErr(err)
		return err
	}
	if err := a.ack.check(wait); err != nil {
		cmd.SetErr(err)
		return err
	}
	return nil
}

// witnessTTL is how long a witness key lives: long enough to be written
// again before it expires on a busy slot, short enough to leave nothing.
const witnessTTL = time.Second

// witnessKey is the key, in the slot of key and under key's own prefix,
// that a witness write sets: key+":witness" for a key with a hash tag,
// key+"{"+key+"}:witness" for one without. Starting with key, it is within
// every ACL key pattern that lets a user write key (~shop:* for a store
// under WithPrefix("shop:")). (A key with an empty hash tag, "a{}b", hashes
// whole and its witness would not share its slot: stockguard's keys always
// carry a tag, or none.)
//
// WAIT confirms the writes of its own connection, up to that connection's
// last command that changed something (Redis's client woff). A command
// that changed nothing — a take refused for want of stock, a lock found
// held, a script finding its work already done, an order read — would
// leave WAIT confirming an older write, while its reply rests on what
// other connections wrote and no replica may have yet. A witness write
// after it moves the connection's mark to the master's current offset, so
// WAIT confirms everything the command saw.
func witnessKey(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 && strings.IndexByte(key[i+1:], '}') > 0 {
		return key + ":witness"
	}
	return key + "{" + key + "}:witness"
}

// pipeline returns a pipeline on the connection that cmd must go to, and
// the cluster client when routing went through one.
func (a *acked) pipeline(ctx context.Context, cmd redis.Cmder, key string, keyed bool) (redis.Pipeliner, *redis.ClusterClient, error) {
	switch c := a.ScriptClient.(type) {
	case *redis.Ring:
		// A Ring pipeline splits by shard, and a keyless WAIT has none.
		return nil, nil, fmt.Errorf("%w: %v cannot follow a write through a *redis.Ring, nothing sent", stockguard.ErrUnavailable, a.ack)
	case *redis.ClusterClient:
		if !keyed {
			return nil, nil, fmt.Errorf("%w: %s has no key to route its %v by, nothing sent", stockguard.ErrUnavailable, cmd.Name(), a.ack)
		}
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: no master for %q, nothing sent: %w", stockguard.ErrUnavailable, key, err)
		}
		return node.Pipeline(), c, nil
	case interface{ Pipeline() redis.Pipeliner }:
		return c.Pipeline(), nil, nil
	}
	return nil, nil, fmt.Errorf("%w: %T cannot pipeline, so cannot send %v on the write's connection; nothing sent", stockguard.ErrUnavailable, a.ScriptClient, a.ack)
}

// firstKey returns the first key of cmd: after numkeys for EVAL, EVALSHA
// and FCALL (none when numkeys is 0), else the first argument.
func firstKey(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	pos := 1
	switch strings.ToLower(cmd.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		if len(args) < 3 || fmt.Sprint(args[2]) == "0" {
			return "", false
		}
		pos = 3
	}
	if len(args) <= pos {
		return "", false
	}
	switch k := args[pos].(type) {
	case string:
		return k, true
	case []byte:
		return string(k), true
	}
	return fmt.Sprint(args[pos]), true
}

// probeAOF checks once that the server takes WAITAOF with a's Local: a
// refusal is kept and returned for every command, as ErrUnavailable; a
// failed probe is not kept.
func (a *acked) probeAOF(ctx context.Context) error {
	if !a.ack.AOF {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ok || a.probe != nil {
		return a.probe
	}
	cmd := redis.NewIntSliceCmd(ctx, "waitaof", a.ack.Local, 0, 1)
	err := a.ScriptClient.Process(ctx, cmd)
	var reply redis.Error
	switch {
	case err == nil:
		a.ok = true
		return nil
	case errors.As(err, &reply):
		a.probe = fmt.Errorf("%w: %v needs Redis ≥ 7.2 or Valkey ≥ 8 (with appendonly yes for local fsyncs); the server answered: %w, nothing sent",
			stockguard.ErrUnavailable, a.ack, err)
		return a.probe
	}
	return Classify(ctx, err, Read)
}

// Sleep waits d or until ctx ends, and returns the context's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// evalCmd builds EVAL or EVALSHA as go-redis's own Eval does (name,
// payload, numkeys, keys, args; first key at 3 for cluster routing).
func evalCmd(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, payload, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// Ready returns nil when c, a result of Acked, can confirm writes: with
// WAITAOF, the server's support for it is probed once (as before Acked's
// first command); other clients are always ready. It is for writes that
// cannot go through c itself (a MULTI/EXEC on a WATCHed connection; see
// Pipe), checked before they are sent.
func Ready(ctx context.Context, c ScriptClient) error {
	if a, ok := c.(*acked); ok {
		return a.probeAOF(ctx)
	}
	return nil
}

// Pipe queues a's WAIT or WAITAOF on p, after the write queued there, and
// returns the check to call once p has run: nil when the write is
// confirmed, else an *AckError. A write must end the queue (EXEC, not a
// command inside MULTI, where WAIT does not block). For a zero a it queues
// nothing and the check returns nil.
func Pipe(ctx context.Context, p redis.Pipeliner, a Ack) func() error {
	if !a.On() {
		return func() error { return nil }
	}
	wait := a.command(ctx)
	_ = p.Process(ctx, wait)
	return func() error { return a.check(wait) }
}
