// Package stockguard defines the contract every stock-decrement strategy implements: take qty units of a SKU, all or nothing, never below zero.
package stockguard
