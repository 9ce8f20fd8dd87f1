// Package redisx holds what every Redis strategy of stockguard shares: error classification, send-at-most-once commands and stock level parsing.
package redisx
