package pglock

import "fmt"

// Engine is the kind of server behind a pool. The strategies send
// PostgreSQL's statements; an engine that speaks PostgreSQL's protocol but
// lacks some of them (CockroachDB, YugabyteDB) is
// added as a value here, with the strategies it cannot run refusing it —
// ErrUnavailable on first use, before any statement — rather than failing
// in the middle of a request.
type Engine int

const (
	// EnginePostgreSQL is PostgreSQL 12 or later. The default.
	EnginePostgreSQL Engine = iota + 1
)

func (e Engine) String() string {
	if e == EnginePostgreSQL {
		return "postgresql"
	}
	return fmt.Sprintf("Engine(%d)", int(e))
}

// WithEngine sets the engine; every strategy of the package reads it.
// Default EnginePostgreSQL.
func WithEngine(e Engine) Option {
	return func(o *options) {
		if e != EnginePostgreSQL {
			o.fail(fmt.Errorf("unknown engine %v", e))
			return
		}
		o.engine = e
	}
}
