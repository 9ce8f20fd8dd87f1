// Package netns runs a server inside a Linux network namespace of its
// own, reached from the test over a veth pair whose link the test can cut
// and heal: every packet on it dropped, TCP's retransmissions included,
// until it heals. It needs root; only _test.go files import it, and its
// tests run only when EnvNetns is set (scripts/soak.sh netns).
package netns

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// EnvNetns, set to 1, runs the tests that make network namespaces.
const EnvNetns = "STOCKGUARD_NETNS"

// NS is a network namespace with one veth pair to the test's own: the
// test's end has HostIP, the namespace's end ServerIP.
type NS struct {
	Name     string
	HostIP   string
	ServerIP string
	hostDev  string
	nsDev    string
}

// New makes a namespace and its veth pair, deleted when t ends. It skips
// t unless EnvNetns is 1 and the test runs as root.
func New(t testing.TB) *NS {
	t.Helper()
	if os.Getenv(EnvNetns) != "1" {
		t.Skipf("makes a network namespace: set %s=1, as root (bash scripts/soak.sh netns)", EnvNetns)
	}
	if os.Geteuid() != 0 {
		t.Skipf("%s is set, but making a network namespace needs root", EnvNetns)
	}
	var b [3]byte
	rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	// A /30 of 10.231.0.0/16 from the tag, so that runs side by side do
	// not share addresses.
	net3, net4 := int(b[0]), int(b[1])&^3
	n := &NS{
		Name:     "sg-" + tag,
		HostIP:   fmt.Sprintf("10.231.%d.%d", net3, net4+1),
		ServerIP: fmt.Sprintf("10.231.%d.%d", net3, net4+2),
		hostDev:  "sg" + tag + "h",
		nsDev:    "sg" + tag + "n",
	}
	run(t, "ip", "netns", "add", n.Name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.Name).Run() }) // takes the veth pair with it
	run(t, "ip", "link", "add", n.hostDev, "type", "veth", "peer", "name", n.nsDev)
	t.Cleanup(func() { exec.Command("ip", "link", "del", n.hostDev).Run() }) // if the namespace never got its end
	run(t, "ip", "link", "set", n.nsDev, "netns", n.Name)
	run(t, "ip", "addr", "add", n.HostIP+"/30", "dev", n.hostDev)
	run(t, "ip", "link", "set", n.hostDev, "up")
	run(t, "ip", "-n", n.Name, "addr", "add", n.ServerIP+"/30", "dev", n.nsDev)
	run(t, "ip", "-n", n.Name, "link", "set", n.nsDev, "up")
	run(t, "ip", "-n", n.Name, "link", "set", "lo", "up")
	return n
}

// Command returns a command that runs name inside the namespace.
func (n *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Cut takes the namespace's end of the link down: from then on every
// packet between the test and the server is dropped, while the
// connections stay open and their kernels keep retransmitting.
func (n *NS) Cut(t testing.TB) {
	t.Helper()
	run(t, "ip", "-n", n.Name, "link", "set", n.nsDev, "down")
}

// Heal brings the link back up (and the route the namespace's address
// gives it): the next retransmission gets through.
func (n *NS) Heal(t testing.TB) {
	t.Helper()
	run(t, "ip", "-n", n.Name, "link", "set", n.nsDev, "up")
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// StartRedis starts a private redis-server from PATH inside the
// namespace, stopped when t ends. It returns its address on the cut-able
// link, and a Unix socket that reaches it whatever the link does (for the
// test's own calls: the repeat, the checks).
func (n *NS) StartRedis(t testing.TB) (addr, unixSocket string) {
	t.Helper()
	dir := t.TempDir()
	unixSocket = filepath.Join(dir, "redis.sock")
	cmd := n.Command("redis-server", "--port", "6379", "--bind", n.ServerIP, "--protected-mode", "no",
		"--unixsocket", unixSocket, "--unixsocketperm", "700",
		"--dir", dir, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "server.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server in %s: %v", n.Name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.Dial("unix", unixSocket)
		if err == nil {
			c.Close()
			return net.JoinHostPort(n.ServerIP, "6379"), unixSocket
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("redis-server in %s did not start: %v\n%s", n.Name, err, log)
		}
	}
}
