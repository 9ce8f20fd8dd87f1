package stocktest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/internal/memorders"
	"github.com/stockguard/stockguard/internal/memstock"
	"github.com/stockguard/stockguard/stocktest"
)

// Check an Inventory of your own without a *testing.T: every violation of
// the contract comes back as a value.
func ExampleSuite_Check() {
	store := memstock.New() // stands in for your Inventory
	suite := stocktest.Suite{Goroutines: 16, Stock: 100}
	violations := suite.Check(context.Background(), func() stockguard.Inventory { return store })
	fmt.Println("violations:", len(violations))
	// Output: violations: 0
}

// In your own tests, Run makes every case a subtest. The function is called
// for each instance a case needs; return instances that share one store, as
// two processes of your application would.
func ExampleRun() {
	// func TestMyInventory(t *testing.T) {
	testMyInventory := func(t *testing.T) {
		store := memstock.New() // stands in for a connection to your shared store
		stocktest.Run(t, func(t *testing.T) stockguard.Inventory { return store })
	}
	_ = testMyInventory
}

// An Orders strategy runs both suites. Footprint lets the suite check that
// requests for SKUs never stocked, and orders never placed, create nothing:
// count what the store holds — keys under the strategy's prefix, rows in its
// tables.
func ExampleSuite_RunOrders() {
	// func TestMyOrders(t *testing.T) {
	testMyOrders := func(t *testing.T) {
		store := memorders.New() // stands in for a connection to your shared store
		suite := stocktest.Suite{Footprint: store.Footprint}
		suite.Run(t, func(t *testing.T) stockguard.Inventory { return store })
		suite.RunOrders(t, func(t *testing.T) stockguard.Orders { return store })
	}
	_ = testMyOrders
}

// CheckOrders returns the violations as values, without a *testing.T.
func ExampleSuite_CheckOrders() {
	store := memorders.New() // stands in for your Orders
	violations := stocktest.Suite{}.CheckOrders(context.Background(), func() stockguard.Orders { return store })
	fmt.Println("violations:", len(violations))
	// Output: violations: 0
}
