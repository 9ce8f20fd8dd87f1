package mysqllock

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Strings never depend on the connection's character set.
//
// A driver that interpolates (interpolateParams) escapes a quote, a
// backslash and a few control bytes with a backslash; under a character
// set whose second byte of a character can be 0x5c (gbk, gb18030, big5,
// sjis, cp932) a string's last byte and that backslash are one character,
// and what follows the quote runs as SQL. The connection's character set
// can change under the pool at any time — a SET NAMES run on a pooled
// connection, init_connect on the new connections of a pool that renews
// them — so no probe of the pool can vouch for a statement.
//
// So no string this package sends is ever escaped: one that holds a byte
// the driver would escape is written into the statement as a hexadecimal
// literal, _utf8mb4 X'…', whose text is digits and letters in every
// character set (bind); every other string is a plain run of bytes between
// quotes, and in none of the character sets a server accepts from a client
// can a quote be the second byte of a character, so its closing quote
// ends it, escaped or bound, whatever the connection's settings. On a
// multiStatements pool every argument is written into the statement
// (inline), so the driver never falls back to preparing a multi-statement,
// which the server refuses.

// escapable reports whether the driver escapes a byte of s.
func escapable(s string) bool {
	return strings.ContainsAny(s, "\x00\n\r\x1a'\"\\")
}

// bind returns query and args with every string argument the driver would
// escape written into query as a hexadecimal literal; query and args as
// they are when there is none.
func bind(query string, args []any) (string, []any) {
	for _, a := range args {
		if s, ok := a.(string); ok && escapable(s) {
			return splice(query, args, func(a any) bool {
				s, ok := a.(string)
				return ok && escapable(s)
			}), keep(args)
		}
	}
	return query, args
}

// keep returns the arguments bind leaves to the driver.
func keep(args []any) []any {
	kept := make([]any, 0, len(args))
	for _, a := range args {
		if s, ok := a.(string); !ok || !escapable(s) {
			kept = append(kept, a)
		}
	}
	return kept
}

// inline returns query with every argument written into it as a literal.
func inline(query string, args []any) string {
	if len(args) == 0 {
		return query
	}
	return splice(query, args, func(any) bool { return true })
}

// splice writes the arguments that take reports true for into query in
// place of their placeholders (a ? outside quotes, backticks and
// comments) and leaves the other placeholders be. It panics when query
// and args disagree: the package's own statements.
func splice(query string, args []any, take func(any) bool) string {
	var b strings.Builder
	b.Grow(len(query) + 32*len(args))
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(query) && query[j] != c {
				if query[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			b.WriteString(query[i:min(j+1, len(query))])
			i = j
			continue
		case c == '?':
			if n >= len(args) {
				panic(fmt.Sprintf("mysqllock: more placeholders than arguments in %q", query))
			}
			a := args[n]
			n++
			if take(a) {
				appendLiteral(&b, a)
				continue
			}
		}
		b.WriteByte(c)
	}
	if n != len(args) {
		panic(fmt.Sprintf("mysqllock: %d placeholders, %d arguments in %q", n, len(args), query))
	}
	return b.String()
}

// appendLiteral writes a as a literal of the statement text: numbers in
// decimal, a string between quotes when it has no byte to escape, else,
// as bytes, in hexadecimal.
func appendLiteral(b *strings.Builder, a any) {
	switch v := a.(type) {
	case nil:
		b.WriteString("NULL")
		return
	case string:
		if escapable(v) {
			b.WriteString("_utf8mb4 X'")
			b.WriteString(hex.EncodeToString([]byte(v)))
			b.WriteByte('\'')
			return
		}
		b.WriteByte('\'')
		b.WriteString(v)
		b.WriteByte('\'')
		return
	case []byte:
		if v == nil {
			b.WriteString("NULL")
			return
		}
		b.WriteString("X'")
		b.WriteString(hex.EncodeToString(v))
		b.WriteByte('\'')
		return
	}
	switch rv := reflect.ValueOf(a); rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		b.WriteString(strconv.FormatFloat(rv.Float(), 'e', -1, 64))
	case reflect.Bool:
		if rv.Bool() {
			b.WriteString("TRUE")
		} else {
			b.WriteString("FALSE")
		}
	case reflect.String:
		appendLiteral(b, rv.String())
	default:
		panic(fmt.Sprintf("mysqllock: no literal for %T", a))
	}
}

// execBound runs query on e with its arguments bound (see bind).
func execBound(ctx context.Context, e sqlx.ExecerContext, query string, args ...any) (sql.Result, error) {
	query, args = bind(query, args)
	return e.ExecContext(ctx, query, args...)
}

// rowBound reads one row of query on q with its arguments bound (see
// bind).
func rowBound(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) *sqlx.Row {
	query, args = bind(query, args)
	return q.QueryRowxContext(ctx, query, args...)
}

// selectBound reads every row of query on q into dest with its arguments
// bound (see bind).
func selectBound(ctx context.Context, q sqlx.QueryerContext, dest any, query string, args ...any) error {
	query, args = bind(query, args)
	return sqlx.SelectContext(ctx, q, dest, query, args...)
}
