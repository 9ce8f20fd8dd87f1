//go:build !linux

package netns

import (
	"net"
	"testing"
)

func (n *NS) listen(t testing.TB) net.Listener {
	t.Helper()
	t.Fatal("network namespaces are Linux's")
	return nil
}
