package mysqllock

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stockguard/stockguard"
)

// escapeProbes are valid UTF-8 strings that end in a byte that starts a
// two-byte character, whose second byte may be 0x5c (a backslash), in the
// multibyte charsets MySQL, MariaDB and TiDB accept from a client — read
// from their first byte in those charsets' pairs: 中 (E4 B8 AD) in gbk,
// gb18030 and big5, ぁ (E3 81 81) in gbk, gb18030, sjis and cp932. A
// driver that escapes a following quote as \' client-side
// (interpolateParams) under such a charset hands the server lead, 0x5c,
// quote — one character and a closing quote — so the rest of a SKU, an
// order ID or a lock name would run as SQL. Being valid UTF-8, the probes
// are plain strings to a server whose charset is utf8mb4.
var escapeProbes = []string{"中", "ぁ"}

// errUnsafeEscaping is the error every request of a pool whose strings
// could run as SQL returns (see checkEscaping).
var errUnsafeEscaping = errors.New("mysqllock: the pool's connections escape strings in the statement text (interpolateParams) under a character set where an escaped quote can end the string (gbk, gb18030, big5, sjis, cp932): a SKU or order ID could run as SQL; set charset=utf8mb4 on the DSN, or drop interpolateParams (and multiStatements)")

// checkEscaping proves on conn that a string argument stays a string
// whatever the connection's settings: for each probe it sends probe,
// quote, ", 2 #" as the first argument of SELECT ?, 1. Bound or escaped
// correctly the row is (the string, 1); spliced where the probe's last
// byte swallows the escaping backslash the quote ends the literal, the
// rest runs and comments out ", 1", and the row is (…, 2). It returns
// nil, an error wrapping stockguard.ErrUnavailable and errUnsafeEscaping,
// or the classified error of the probe's I/O. Every connection of a pool
// shares the DSN's charset, sql_mode and interpolateParams, so one
// connection answers for the pool.
func checkEscaping(ctx context.Context, conn *sqlx.Conn) error {
	for _, probe := range escapeProbes {
		var s []byte
		var n int
		err := get(ctx, conn, "SELECT ?, 1", []any{probe + "', 2 #"}, &s, &n)
		var me *mysql.MySQLError
		switch {
		case errors.As(err, &me):
			// The correctly bound probe is a valid statement under any
			// charset and sql_mode: a refusal means it was not bound.
			return fmt.Errorf("%w: %w (the probe failed: %w)", stockguard.ErrUnavailable, errUnsafeEscaping, err)
		case err != nil:
			return classify(ctx, err, unsent)
		case n != 1:
			var charset string
			if err := get(ctx, conn, "SELECT @@character_set_client", nil, &charset); err != nil {
				charset = "unknown"
			}
			return fmt.Errorf("%w: %w (character_set_client=%s)", stockguard.ErrUnavailable, errUnsafeEscaping, charset)
		}
	}
	return nil
}
