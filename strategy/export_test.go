package strategy

import "time"

// Ceiling exposes ceiling to the external tests.
func Ceiling(p RetryPolicy, retry int, extra time.Duration) time.Duration {
	return ceiling(withDefaults(p), retry, extra)
}
