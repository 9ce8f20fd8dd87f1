package redislock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/backends/backendstest"
	"github.com/stockguard/stockguard/internal/must"
	"github.com/stockguard/stockguard/internal/rediskeys"
	"github.com/stockguard/stockguard/mysqllock"
	"github.com/stockguard/stockguard/redislock/lock"
)

// envPauseHolder, when set, makes the test binary play lock holder A of
// TestKleppmannPause instead of running tests. Its value is a pauseHolder
// in JSON.
const envPauseHolder = "REDISLOCK_PAUSE_HOLDER"

// pauseHolder configures holder A.
type pauseHolder struct {
	Redis    string        // address
	Prefix   string        // key prefix
	SKU      string        //
	TTL      time.Duration // lock lease
	DSN      string        // MySQL DSN when the stock is in MySQL, else ""
	Table    string        // MySQL stock table
	Quantity int64         // the stock level A writes
}

// The holder must run before the testing package takes over: a test
// function doing it would show up as a test that passed.
func init() {
	if cfg := os.Getenv(envPauseHolder); cfg != "" {
		os.Exit(runPauseHolder(cfg))
	}
}

// runPauseHolder is holder A: it obtains the lock with a watchdog, reports
// its token, and blocks on stdin — where the parent stops it (SIGSTOP) and,
// past its lease, continues it. Then, without looking at its lock (a
// process cannot know it was frozen between a check and a write), it
// writes twice: fenced, then unfenced. It reports each outcome on stdout.
func runPauseHolder(config string) int {
	var cfg pauseHolder
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
	defer rdb.Close()
	store, unfenced, err := pauseStores(rdb, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	l, err := must.New(lock.New(rdb, lock.WithPrefix(cfg.Prefix))).Obtain(ctx, cfg.SKU, cfg.TTL, lock.Watchdog())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("obtained %d\n", l.Token())
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = store.WriteFenced(ctx, cfg.SKU, cfg.Quantity, l.Token())
	fmt.Printf("fenced %v %v\n", errors.Is(err, stockguard.ErrContention), err)
	n, err := store.Stock(ctx, cfg.SKU)
	fmt.Printf("between %d %v\n", n, err)
	fmt.Printf("unfenced %v\n", unfenced(ctx, cfg.SKU, cfg.Quantity))
	// The lease ran out by this process's clock during the pause: Lost is
	// due at once. The wait is only a hang guard, within the parent's.
	select {
	case <-l.Lost():
		fmt.Println("lost true")
	case <-time.After(20 * time.Second):
		fmt.Println("lost false")
	}
	return 0
}

// pauseStores returns the fenced store of cfg and a deliberately unfenced
// write path to the same stock — a plain "SET stock" / "UPDATE stock SET
// qty", as an unguarded writer would.
func pauseStores(rdb *redis.Client, cfg pauseHolder) (Store, func(ctx context.Context, sku string, qty int64) error, error) {
	if cfg.DSN == "" {
		keys := rediskeys.Keys{Prefix: cfg.Prefix}
		return must.New(NewRedisStore(rdb, WithPrefix(cfg.Prefix))), func(ctx context.Context, sku string, qty int64) error {
			return rdb.Set(ctx, keys.Stock(sku), qty, 0).Err()
		}, nil
	}
	db, err := sqlx.Open("mysql", cfg.DSN)
	if err != nil {
		return nil, nil, err
	}
	return must.New(mysqllock.NewFencedStore(db, mysqllock.WithTable(cfg.Table))), func(ctx context.Context, sku string, qty int64) error {
		_, err := db.ExecContext(ctx, "UPDATE "+cfg.Table+" SET qty = ? WHERE sku = ?", qty, sku)
		return err
	}, nil
}

// TestKleppmannPause: holder A, a child process, obtains the lock with a
// watchdog and is frozen (SIGSTOP) past its lease — watchdog included, as in
// a GC pause. B obtains the lock and writes. A is continued and writes. The
// fenced write of A must be refused and leave B's write intact; the
// unfenced write of A must overwrite it — the lost update that a lock
// without fencing lets through, seen happening.
func TestKleppmannPause(t *testing.T) {
	t.Run("store=redis", func(t *testing.T) {
		rdb := backendstest.RedisClient(t)
		cfg := pauseHolder{Redis: backendstest.SharedRedis(t).Addr, Prefix: lockPrefix(t), SKU: "sku", TTL: 300 * time.Millisecond, Quantity: 70}
		kleppmannPause(t, rdb, cfg, must.New(NewRedisStore(rdb, WithPrefix(cfg.Prefix))))
	})
	t.Run("store=mysql", func(t *testing.T) {
		rdb := backendstest.RedisClient(t)
		db := backendstest.DB(t)
		cfg := pauseHolder{Redis: backendstest.SharedRedis(t).Addr, Prefix: lockPrefix(t), SKU: "sku", TTL: 300 * time.Millisecond, Quantity: 70,
			DSN: backendstest.SharedMySQL(t).DSN, Table: fencedTable(t, db)}
		kleppmannPause(t, rdb, cfg, must.New(mysqllock.NewFencedStore(db, mysqllock.WithTable(cfg.Table))))
	})
}

func kleppmannPause(t *testing.T, rdb *redis.Client, cfg pauseHolder, store Store) {
	ctx := t.Context()
	const initial, qtyB = 100, 50
	if err := store.SetStock(ctx, cfg.SKU, initial); err != nil {
		t.Fatal(err)
	}
	env, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envPauseHolder+"="+string(env))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(prefix string) string {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok || !strings.HasPrefix(line, prefix+" ") {
				t.Fatalf("holder A said %q (open %v), want %q…; stderr:\n%s", line, ok, prefix, stderr.String())
			}
			return strings.TrimPrefix(line, prefix+" ")
		case <-time.After(30 * time.Second):
			t.Fatalf("holder A silent, waiting for %q; stderr:\n%s", prefix, stderr.String())
		}
		return ""
	}
	tokenA, err := strconv.ParseInt(next("obtained"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	// Freeze A, watchdog and all, until its lease has run out in Redis.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	lockKey := must.New(lock.New(rdb, lock.WithPrefix(cfg.Prefix))).LockKey(cfg.SKU)
	for start := time.Now(); rdb.Exists(ctx, lockKey).Val() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 30*time.Second { // a hang guard: the lease is cfg.TTL
			t.Fatal("A's lock outlived its frozen watchdog")
		}
	}

	b, err := must.New(lock.New(rdb, lock.WithPrefix(cfg.Prefix))).Obtain(ctx, cfg.SKU, 10*time.Second)
	if err != nil {
		t.Fatalf("B could not obtain the expired lock: %v", err)
	}
	defer b.Release(ctx)
	if b.Token() <= tokenA {
		t.Fatalf("B's token %d not above A's %d", b.Token(), tokenA)
	}
	if err := store.WriteFenced(ctx, cfg.SKU, qtyB, b.Token()); err != nil {
		t.Fatalf("B's fenced write: %v", err)
	}

	// A wakes up and writes, as if nothing had happened.
	if _, err := io.WriteString(stdin, "write\n"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if got := next("fenced"); !strings.HasPrefix(got, "true ") {
		t.Fatalf("A's fenced write after the pause: %s; want refused (ErrContention)", got)
	}
	if got := next("between"); got != strconv.Itoa(qtyB)+" <nil>" {
		t.Fatalf("stock after A's refused write: %s; want B's %d", got, qtyB)
	}
	if got := next("unfenced"); got != "<nil>" {
		t.Fatalf("A's unfenced write failed: %s", got)
	}
	n, err := store.Stock(ctx, cfg.SKU)
	if err != nil {
		t.Fatal(err)
	}
	if n != cfg.Quantity {
		t.Fatalf("stock %d after A's unfenced write, want A's %d: the harness did not see the double write", n, cfg.Quantity)
	}
	t.Logf("unfenced: B wrote %d with token %d, then A (token %d, lease long gone) overwrote it with %d — a lost update", qtyB, b.Token(), tokenA, n)
	if got := next("lost"); got != "true" {
		t.Fatalf("A's watchdog did not report the loss after the pause (%s)", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("holder A: %v; stderr:\n%s", err, stderr.String())
	}
}
