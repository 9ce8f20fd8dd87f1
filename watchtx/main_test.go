package watchtx

import (
	"testing"

	"github.com/stockguard/stockguard/internal/backends"
)

func TestMain(m *testing.M) { backends.Main(m) }
