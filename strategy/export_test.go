package strategy

import "time"

// Ceiling exposes RetryPolicy.ceiling to the external tests.
func Ceiling(p RetryPolicy, retry int, extra time.Duration) time.Duration {
	return p.withDefaults().ceiling(retry, extra)
}
