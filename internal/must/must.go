// Package must turns the errors a test does not expect into panics.
package must

// New returns v, or panics with err: a test's constructor options are
// fixed, so a constructor that refuses them is a bug in the test.
func New[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
