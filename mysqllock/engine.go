package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// Engine is the kind of server behind a pool: the strategies send the same
// statements to every engine, except where an engine needs its own (see
// EngineTiDB).
type Engine int

const (
	// EngineDetect asks the server on first use: a server that answers
	// SELECT tidb_version() is TiDB, any other is MySQL or MariaDB.
	// The default.
	EngineDetect Engine = iota
	// EngineMySQL is MySQL or MariaDB with InnoDB: every statement as the
	// strategies' doc comments show them.
	EngineMySQL
	// EngineTiDB is TiDB. It runs autocommit statements optimistically
	// unless configured otherwise: concurrent writers of one row do not
	// queue on its lock but conflict at commit and are retried, which on a
	// hot row costs more than queueing. So on TiDB NewAtomic's Decrement
	// runs its UPDATE in a transaction, and every connection a strategy
	// uses gets, once,
	//
	//	SET SESSION tidb_txn_mode = 'pessimistic', transaction_isolation = 'READ-COMMITTED'
	//
	// so that transactions lock rows as on InnoDB whatever the cluster's
	// default mode, and a plain read after a locking one sees the rows as
	// the lock found them: under REPEATABLE READ TiDB reads from a snapshot
	// taken when the transaction began, InnoDB from one taken at its first
	// plain read — which the strategies place after their locks. Features
	// TiDB lacks are reported when a strategy is first used (NewPessimistic
	// with LockSkipLocked: ErrUnavailable).
	EngineTiDB
)

func (e Engine) String() string {
	switch e {
	case EngineDetect:
		return "detect"
	case EngineMySQL:
		return "mysql"
	case EngineTiDB:
		return "tidb"
	}
	return fmt.Sprintf("Engine(%d)", int(e))
}

// WithEngine sets the engine instead of asking the server; every strategy
// of the package reads it. EngineMySQL on
// a TiDB server sends MySQL's statements as they are — NewAtomic's
// autocommit UPDATE, TiDB's own transaction mode — which is how to measure
// what the engine-specific path gains. Default EngineDetect.
func WithEngine(e Engine) Option {
	return func(o *options) {
		o.given |= optEngine
		if e < EngineDetect || e > EngineTiDB {
			o.fail(fmt.Errorf("unknown engine %v", e))
			return
		}
		o.engine = e
	}
}

// engineProbe finds a store's engine once and prepares each connection for
// it.
type engineProbe struct {
	supports func(Engine) error // the strategy's check of what it needs; nil: anything
	tidb     *sessionInit       // applied to every connection on TiDB

	mu      sync.Mutex
	eng     Engine // EngineDetect until known
	escapes error  // checkEscaping's verdict once known: nil or unsafe
	checked bool   // escapes is known
}

func newEngineProbe(e Engine, supports func(Engine) error) *engineProbe {
	return &engineProbe{
		supports: supports,
		tidb:     newSessionInit("SET SESSION tidb_txn_mode = 'pessimistic', transaction_isolation = 'READ-COMMITTED'"),
		eng:      e,
	}
}

// known returns the engine once detected (or set), else EngineDetect.
func (p *engineProbe) known() Engine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eng
}

// prepare detects the engine on conn unless known, checks that the
// strategy can run on it and that the pool keeps strings strings
// (checkEscaping, once), and applies the engine's session settings to
// conn. Nothing it sends changes stock.
func (p *engineProbe) prepare(ctx context.Context, conn *sqlx.Conn) error {
	p.mu.Lock()
	eng, checked, escapes := p.eng, p.checked, p.escapes
	p.mu.Unlock()
	if checked && escapes != nil {
		return escapes
	}
	if eng == EngineDetect {
		var err error
		if eng, err = detectEngine(ctx, conn); err != nil {
			return err
		}
		p.mu.Lock()
		p.eng = eng
		p.mu.Unlock()
	}
	if !checked {
		escapes = checkEscaping(ctx, conn)
		if escapes != nil && !errors.Is(escapes, errUnsafeEscaping) {
			return escapes // the probe's I/O failed: ask again next time
		}
		p.mu.Lock()
		p.checked, p.escapes = true, escapes
		p.mu.Unlock()
		if escapes != nil {
			return escapes
		}
	}
	if p.supports != nil {
		if err := p.supports(eng); err != nil {
			return fmt.Errorf("%w: mysqllock: %w", stockguard.ErrUnavailable, err)
		}
	}
	if eng == EngineTiDB {
		return p.tidb.apply(ctx, conn)
	}
	return nil
}

// detectEngine asks the server behind conn which engine it is. On TiDB
// tidb_version() is a built-in that any user may call; MySQL and MariaDB
// look for a stored function of that name and refuse with an error that
// depends on the session (1305 no such function, 1046 no default
// database, 1370 no EXECUTE privilege on it): any server error means
// MySQL or MariaDB, any other failure is classified.
func detectEngine(ctx context.Context, conn *sqlx.Conn) (Engine, error) {
	var version string
	err := get(ctx, conn, "SELECT tidb_version()", nil, &version)
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return EngineTiDB, nil
	case errors.As(err, &me):
		return EngineMySQL, nil
	}
	return EngineDetect, classify(ctx, err, unsent)
}
