package redislock_test

// mustNew returns v, or panics with err: a test's constructor options are
// fixed, so a constructor that refuses them is a bug in the test.
func mustNew[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
