//go:build docker

package main

// Built with -tags docker, stockbench can start MySQL and Redis containers
// when neither the flags, the environment nor local binaries give servers.
// Not by default: testcontainers-go links package testing into the binary.
import _ "github.com/stockguard/stockguard/internal/backends/dockerbackend"
