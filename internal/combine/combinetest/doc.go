// Package combinetest holds test helpers shared by the tests of package combine and of the batched strategies built on it; only _test.go files import it.
package combinetest
