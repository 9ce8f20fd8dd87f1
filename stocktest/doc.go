// Package stocktest is the conformance suite every stockguard.Inventory must
// pass, and every stockguard.Orders too: run it with Run and RunOrders, or
// inspect violations with Suite.Check and Suite.CheckOrders.
//
// A strategy's test that can count what its store holds (keys under its
// prefix, rows in its tables) sets Suite.Footprint, so that the suite also
// checks that requests for SKUs never stocked create nothing.
package stocktest
