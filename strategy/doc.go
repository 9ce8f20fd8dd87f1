// Package strategy holds helpers for writing a stockguard strategy: request validation, contract errors, retries and order lines.
package strategy
