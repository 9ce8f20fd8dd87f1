package lock

import (
	"testing"

	"github.com/stockguard/stockguard/internal/backends/backendstest"
)

func TestMain(m *testing.M) { backendstest.Main(m) }
