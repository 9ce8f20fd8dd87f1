package tiered

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/strategy"
)

// The back's fence. A back that is a strategy.Fencer (mysqllock's and
// pglock's NewAtomic and NewBatched) keeps, under the name of the front's
// stream, an epoch number that Recover advances before it reads the
// back; a Consumer writes to the back only through the view fenced at the
// number of the epoch its reads found, so a transaction of a lost front's
// consumer that reaches the back late — its statements or its COMMIT held
// on the way past its lease — either lands before Recover reads the back
// (Recover's advance waits for it) or changes nothing (strategy.ErrFenced).
// The number rides in the epoch key's value, "<number>.<token>"; a value
// without one (Setup's) is number 0, the number of a fence never advanced.
// Against another back only the lease (WithApplyLease) and Recover's
// second reading of the back's levels stand.

// armedEpoch is the epoch value Recover arms under the back's fence number
// n: token alone when the back keeps no fence (fenced false).
func armedEpoch(n int64, fenced bool, token string) string {
	if !fenced {
		return token
	}
	return strconv.FormatInt(n, 10) + "." + token
}

// epochNumber is the back's fence number an epoch value carries: 0 for
// one without it.
func epochNumber(epoch string) int64 {
	num, _, ok := strings.Cut(epoch, ".")
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// backView is what a Consumer applies entries with under epoch: back's
// view fenced at the epoch's number under name, or back itself when it
// keeps no fence or name is empty (a Queue's consumer: no stream name).
func backView(back stockguard.Orders, name, epoch string) strategy.FencedOrders {
	if f, ok := back.(strategy.Fencer); ok && name != "" {
		return f.Fenced(name, epochNumber(epoch))
	}
	return back
}

// errFenced is a Step's error when the back refused its writes as fenced:
// the front's epoch it read is not the back's any more.
func errFenced(epoch string) error {
	return fmt.Errorf("%w: the back refused epoch %q: %w", ErrFrontLost, epoch, strategy.ErrFenced)
}
