// Package counterexample holds widely copied but broken stock-decrement patterns, each a real Inventory, kept only to prove that the harness's audit catches them: never use them.
package counterexample
