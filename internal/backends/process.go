package backends

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// reaper runs a server as its child and stops it, then removes the server's
// temp dir, as soon as its stdin reaches EOF. The parent holds the write end
// of that pipe, so the kernel closes it whenever the parent dies — a panicking
// or killed test binary still leaves no server and no temp dir behind, which
// t.Cleanup or a deferred Close cannot promise. A line "keep" before the EOF
// stops the server but keeps the dir, for Respawn.
const reaper = `log=$1; dir=$2; shift 2
"$@" >>"$log" 2>&1 </dev/null &
pid=$!
echo "$pid"
exec >/dev/null 2>&1
read -r cmd
kill -CONT "$pid"; kill -TERM "$pid"
i=0
while [ $i -lt 150 ]; do
  st=$(cut -d' ' -f3 "/proc/$pid/stat") || break
  [ "$st" = Z ] && break
  sleep 0.1; i=$((i+1))
done
kill -KILL "$pid"; wait "$pid"
[ "$cmd" = keep ] || rm -rf "$dir"
`

// Process is a server started from a local binary, handed to tests so that a
// fault test can pause, kill and restart it. All methods are safe for
// concurrent use.
type Process struct {
	Dir  string   // the server's private temp dir, removed on Close
	Args []string // the command line it was started with
	Port int      // the loopback TCP port it listens on (see waitReady)

	mu    sync.Mutex
	pid   int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// start runs argv, a server that listens on port (0: none), under the
// reaper in dir, logging to dir/server.log.
func start(dir string, port int, argv ...string) (*Process, error) {
	p := &Process{Dir: dir, Args: argv, Port: port}
	return p, p.spawn()
}

func (p *Process) spawn() error {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	args := append([]string{"-c", reaper, "reaper", p.Log(), p.Dir}, p.Args...)
	cmd := exec.Command("/bin/sh", args...)
	// Own process group: a ^C aimed at `go test` must not kill the server
	// before the reaper can remove its dir; the reaper sees the EOF anyway.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil {
		stdin.Close()
		cmd.Wait()
		return fmt.Errorf("backends: starting %s: no pid from reaper (%v)", p.Args[0], errors.Join(err, perr))
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.pid, p.cmd, p.stdin, p.done = pid, cmd, stdin, done
	p.mu.Unlock()
	return nil
}

// Pid is the server's process id.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Log is the path of the server's combined stdout/stderr.
func (p *Process) Log() string { return filepath.Join(p.Dir, "server.log") }

// Signal sends sig to the server: SIGSTOP pauses it, SIGCONT resumes it,
// SIGKILL crashes it.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(p.Pid(), sig)
}

// Pause stops the server with SIGSTOP: connections stay open, nothing answers.
func (p *Process) Pause() error { return p.Signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (p *Process) Resume() error { return p.Signal(syscall.SIGCONT) }

// Kill crashes the server with SIGKILL. Restart brings up a new one.
func (p *Process) Kill() error { return p.Signal(syscall.SIGKILL) }

// Close stops the server (SIGTERM, SIGKILL after 15s) and removes its dir.
// It waits until both are done. Closing twice is harmless.
func (p *Process) Close() error {
	p.mu.Lock()
	stdin, done := p.stdin, p.done
	p.stdin = nil
	p.mu.Unlock()
	if stdin == nil {
		return nil
	}
	stdin.Close()
	<-done
	return nil
}

// Restart stops whatever runs now and starts the same command line again in
// a fresh dir: a crashed server comes back on the same port, empty.
func (p *Process) Restart(ctx context.Context, ready func(context.Context) error) error {
	if err := p.Close(); err != nil {
		return err
	}
	if err := p.spawn(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return p.waitReady(ctx, ready)
}

// Respawn stops whatever runs now (SIGTERM, SIGKILL after 15s; a server
// crashed with Kill is already gone) and starts the same command line again
// in the same dir, then waits up to respawnWithin for ready: the server comes
// back on the same port with the data it had made durable, as after a crash
// — MySQL recovers its redo log, Redis replays its append-only file when it
// was started with one.
func (p *Process) Respawn(ctx context.Context, ready func(context.Context) error) error {
	p.mu.Lock()
	stdin, done := p.stdin, p.done
	p.stdin = nil
	p.mu.Unlock()
	if stdin == nil {
		return fmt.Errorf("backends: %s: respawn after Close", p.Args[0])
	}
	_, err := io.WriteString(stdin, "keep\n")
	stdin.Close()
	<-done
	if err != nil {
		return fmt.Errorf("backends: %s: telling the reaper to keep the dir: %w", p.Args[0], err)
	}
	if err := p.spawn(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, respawnWithin)
	defer cancel()
	return p.waitReady(ctx, ready)
}

// respawnWithin bounds a crashed server's recovery: its redo and its
// flushes, which on a loaded machine with a slow disk took a durable
// PostgreSQL a minute.
const respawnWithin = 2 * time.Minute

// Alive reports whether the server is still running (not exited, not a
// zombie).
func (p *Process) Alive() bool {
	f, err := statFields(p.Pid())
	return err == nil && f[0] != "Z"
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name, which is in parentheses and may hold spaces: the state (field 3)
// first, so field n is at n-3. There are at least 15 (up to cstime).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	f, err := parseStat(string(b))
	if err != nil {
		return nil, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return f, nil
}

// parseStat returns the fields of a /proc/<pid>/stat line after the
// command name (see statFields).
func parseStat(s string) ([]string, error) {
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("%d fields after the name", len(f))
	}
	return f, nil
}

// statTicks returns the clock ticks of fields from parseStat: utime,
// stime, cutime and cstime (fields 14 to 17).
func statTicks(f []string) (int64, error) {
	var ticks int64
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return ticks, nil
}

// CPU returns the processor time the server's processes have used so
// far, user and system, as /proc counts it: the server's own, that of the
// children it has reaped, and that of its children still running (one
// PostgreSQL backend per connection). A benchmark's server-side cost per
// call is the difference over its run divided by its calls.
func (p *Process) CPU() (time.Duration, error) {
	ticks, err := procTicks(p.Pid())
	if err != nil {
		return 0, fmt.Errorf("backends: %s's CPU time: %w", p.Args[0], err)
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// procTicks returns the clock ticks pid and its children have used: its
// utime and stime, the cutime and cstime of the children it reaped, and
// the same of each child still running.
func procTicks(pid int) (int64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	ticks, err := statTicks(f)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	for _, t := range tasks {
		// Absent without CONFIG_PROC_CHILDREN, or once the task ended.
		kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, k := range strings.Fields(string(kids)) {
			kid, err := strconv.Atoi(k)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/task/%s/children: %w", pid, t.Name(), err)
			}
			n, err := procTicks(kid)
			if errors.Is(err, fs.ErrNotExist) {
				continue // gone meanwhile: its parent's cutime counts it once reaped
			}
			if err != nil {
				return 0, err
			}
			ticks += n
		}
	}
	return ticks, nil
}

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, 100 a
// second on every Linux architecture's user ABI.
const userHZ = 100

// logTail returns the end of the server log, for error messages.
func (p *Process) logTail() string {
	b, _ := os.ReadFile(p.Log())
	return lastLines(string(b), 2000)
}

// lastLines returns the last lines of log, up to limit bytes, each message
// once: a line that differs from a later one only in its digits (time,
// pid, counters) is left out and counted on the later one. A server that
// refuses connections while it starts logs a line per attempt — ours, a
// fault run's buyers — which would push out of a tail the few lines that
// say what it spent its start on.
func lastLines(log string, limit int) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	keys := map[string]int{} // message without digits → its index in kept
	var kept []string
	var more []int
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		key := strings.Map(func(r rune) rune {
			if '0' <= r && r <= '9' {
				return -1
			}
			return r
		}, lines[i])
		if k, ok := keys[key]; ok {
			more[k]++
			continue
		}
		if size += len(lines[i]) + 1; size > limit && len(kept) > 0 {
			break
		}
		keys[key] = len(kept)
		kept = append(kept, lines[i])
		more = append(more, 0)
	}
	var b strings.Builder
	for k := len(kept) - 1; k >= 0; k-- {
		b.WriteString(kept[k])
		if more[k] > 0 {
			fmt.Fprintf(&b, " (and %d more like it)", more[k])
		}
		if k > 0 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// waitReady polls check until it succeeds and p holds the listener of its
// port (holdsPort), the server dies or ctx ends.
func (p *Process) waitReady(ctx context.Context, check func(context.Context) error) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = check(ctx); last == nil {
			if last = p.holdsPort(); last == nil {
				return nil
			}
		}
		if !p.Alive() {
			return fmt.Errorf("backends: %s exited: %v\n%s", p.Args[0], last, p.logTail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("backends: %s not ready: %w (last: %v)\n%s", p.Args[0], ctx.Err(), last, p.logTail())
		case <-tick.C:
		}
	}
}

// holdsPort returns an error unless p's server holds the listening socket
// of p.Port. A check's answer says that some server listens on the port,
// not that it is p's: freePort's port is free only until a server binds
// it, and another test binary (go test runs packages in parallel) may be
// handed it too, or take it while a Restart or Respawn has it free. The
// server that loses the bind exits, but until it has, the winner answers
// its checks, and a test would go on against the other server and its
// data (a Restart "succeeding" with the data still there).
func (p *Process) holdsPort() error {
	if p.Port == 0 {
		return nil
	}
	if _, err := os.Stat("/proc/net/tcp"); errors.Is(err, fs.ErrNotExist) {
		return nil // no /proc to tell by (not Linux): the check's answer must do
	}
	inodes, err := listeners(p.Port)
	if err != nil {
		return err
	}
	pid := p.Pid()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return fmt.Errorf("backends: %s (pid %d): %w", p.Args[0], pid, err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && inodes[link] {
			return nil
		}
	}
	return fmt.Errorf("backends: %s (pid %d) does not hold port %d: another server does", p.Args[0], pid, p.Port)
}

// listeners returns the sockets listening on TCP port of this network
// namespace, as their fd links read ("socket:[<inode>]"), from
// /proc/net/tcp and tcp6.
func listeners(port int) (map[string]bool, error) {
	out := map[string]bool{}
	want := fmt.Sprintf(":%04X", port)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && file == "/proc/net/tcp6" {
				continue // no IPv6
			}
			return nil, err
		}
		for l := range strings.Lines(string(b)) {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			f := strings.Fields(l)
			if len(f) > 9 && strings.HasSuffix(f[1], want) && f[3] == "0A" { // 0A: LISTEN
				out["socket:["+f[9]+"]"] = true
			}
		}
	}
	return out, nil
}

// handedOut is every port freePort has returned in this process. The
// kernel hands a port it just freed to the next caller as readily as any
// other (about 1 in 2,000 triples of servers started together here got a
// duplicate), and a port stays ours after its server binds it: Restart
// frees it between the old server's exit and the new one's bind, and
// another server of this binary started then would take it. So freePort
// never returns one twice.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// freePort asks the kernel for a free loopback TCP port, one it has not
// returned before (handedOut).
func freePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			if handedOut.ports == nil {
				handedOut.ports = map[int]bool{}
			}
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("backends: no free port that was not handed out before")
}
