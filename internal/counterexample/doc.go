// Package counterexample holds broken stock-decrement and checkout patterns, each a real Inventory — widely copied ones, and sound stores wrapped to be wrong on one path only — kept only to prove that the harness's audit catches them: never use them.
package counterexample
