// Package backends finds or starts the MySQL and Redis servers that tests, benchmarks and stockbench run against.
package backends
