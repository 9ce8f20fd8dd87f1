// Package stocktest is the conformance suite every stockguard.Inventory must pass: run it with Run, or inspect violations with Check.
package stocktest
