// Package optset records which of a package's options a constructor was
// given, so that every constructor refuses one it does not read.
package optset

import (
	"fmt"
	"strings"
)

// Set is a set of a package's options, one bit each, in the order of the
// package's list of option names.
type Set uint32

// Unread returns an error naming, from names, the options of given that
// ctor does not read (not in reads), or nil when it reads them all: an
// option silently ignored would leave the caller believing it in force.
func Unread(ctor string, given, reads Set, names []string) error {
	extra := given &^ reads
	if extra == 0 {
		return nil
	}
	var out []string
	for i, n := range names {
		if extra&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return fmt.Errorf("%s does not read %s", ctor, strings.Join(out, ", "))
}
