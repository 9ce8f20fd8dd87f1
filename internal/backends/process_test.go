package backends

import (
	"runtime"
	"testing"
	"time"
)

func TestProcess_CPU_countsTheServersTime(t *testing.T) {
	for _, c := range []struct{ name, script string }{
		{"itself", "while :; do :; done"},
		// The child goes when its parent is told to, as a server's do.
		{"a child", "sh -c 'while :; do :; done' & trap 'kill $!' TERM; wait"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := start(t.TempDir(), 0, "/bin/sh", "-c", c.script)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			began := time.Now()
			first, err := p.CPU()
			if err != nil {
				t.Fatal(err)
			}
			// However loaded the machine, the busy loop gets the CPU in the
			// end: wait for it (the minute only guards against a hang), and
			// bound it by what the cores could give in the time it took.
			var used time.Duration
			for deadline := time.Now().Add(time.Minute); used < 100*time.Millisecond; {
				if time.Now().After(deadline) {
					t.Fatalf("a busy loop used %v in a minute", used)
				}
				time.Sleep(20 * time.Millisecond)
				then, err := p.CPU()
				if err != nil {
					t.Fatal(err)
				}
				used = then - first
			}
			if most := time.Since(began) * time.Duration(runtime.NumCPU()); used > most {
				t.Fatalf("a busy loop used %v in %v on %d cores", used, time.Since(began), runtime.NumCPU())
			}
		})
	}
}

func TestLastLines_eachMessageOnce(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		limit     int
		want      string
	}{
		{"short log whole", "a\nb\n", 100, "a\nb"},
		{"oldest lines beyond the limit go", "first line\nsecond\nthird\n", 13, "second\nthird"},
		{
			"a refusal per attempt is one line, the work it hid stays",
			"12:00:01 [10] LOG:  syncing data directory, elapsed 10 s\n" +
				"12:00:02 [11] FATAL:  starting up\n12:00:03 [12] FATAL:  starting up\n" +
				"12:00:04 [13] FATAL:  starting up\n12:00:05 [10] LOG:  redo starts\n" +
				"12:00:06 [14] FATAL:  starting up\n",
			130,
			"12:00:01 [10] LOG:  syncing data directory, elapsed 10 s\n" +
				"12:00:05 [10] LOG:  redo starts\n12:00:06 [14] FATAL:  starting up (and 3 more like it)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastLines(tc.log, tc.limit); got != tc.want {
				t.Errorf("lastLines(%q, %d) =\n%s\nwant\n%s", tc.log, tc.limit, got, tc.want)
			}
		})
	}
}
