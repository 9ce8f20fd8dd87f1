// Package stocktest is the conformance suite every stockguard.Inventory must
// pass, and every stockguard.Orders too: run it with Run and RunOrders, or
// inspect violations with Suite.Check and Suite.CheckOrders.
//
// A strategy's test that can count what its store holds (keys under its
// prefix, rows in its tables) sets Suite.Footprint, so that the suite also
// checks that requests for SKUs never stocked create nothing.
//
// An error reads the same whichever strategy returns it: the text of its
// contract error first, and for the conditions any backend meets the
// detail too — stockguard: insufficient stock: "sku" has 5, 6 wanted (or
// "sku" has fewer than the 6 wanted, when the level was not read);
// stockguard: unknown sku: "sku"; stockguard: unknown order: "id";
// stockguard: order closed: "id" is returned.
//
// Adversary attacks several instances of one store at once with a seeded
// workload of callers that give up and repeat (Adversary.RunOrders,
// Adversary.RunInventory), and checks every answer against a model; a
// failure prints the seed that repeats it (EnvAdversarySeed) and
// EnvAdversary=long runs it longer. StringCheck, with the seeds of
// HostileStrings, is what a fuzz target runs on one SKU or order ID
// string.
package stocktest
