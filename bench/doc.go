// Package bench runs stock-decrement workloads against named Inventory targets, measures them and audits that nothing was oversold or lost.
package bench
