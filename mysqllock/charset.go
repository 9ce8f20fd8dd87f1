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

// checkEscaping finds out, once per store on conn, whether the driver
// escapes strings in the statement text under a character set where an
// escaped quote can end the string: for each probe it sends probe, quote,
// ", 2 #" as the first argument of SELECT ?, 1, as the driver binds it.
// Bound or escaped correctly the row is (the string, 1); spliced where the
// probe's last byte swallows the escaping backslash the quote ends the
// literal, the rest runs and comments out ", 1", and the row is (…, 2).
// It returns nil, an error wrapping stockguard.ErrUnavailable and
// errUnsafeEscaping, or the classified error of the probe's I/O.
//
// The package's statements never let the driver escape a string (see
// bind), whatever a connection's character set is now or becomes later:
// the probe refuses a pool set up that way as the misconfiguration it is
// — strings it reads back would come in that character set — not to keep
// strings strings.
func checkEscaping(ctx context.Context, conn *sqlx.Conn) error {
	done, err := enter(ctx, phaseRead)
	if err != nil {
		return err
	}
	defer done()
	for _, probe := range escapeProbes {
		var s []byte
		var n int
		// As the driver binds it: the one statement bind is not used on.
		err := conn.QueryRowxContext(ctx, "SELECT ?, 1", probe+"', 2 #").Scan(&s, &n)
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
			if err := conn.QueryRowxContext(ctx, "SELECT @@character_set_client").Scan(&charset); err != nil {
				charset = "unknown"
			}
			return fmt.Errorf("%w: %w (character_set_client=%s)", stockguard.ErrUnavailable, errUnsafeEscaping, charset)
		}
	}
	return nil
}
