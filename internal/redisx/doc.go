// Package redisx holds what every Redis strategy of stockguard shares: error classification, send-at-most-once commands, stock level parsing and the partition a call carries.
package redisx
