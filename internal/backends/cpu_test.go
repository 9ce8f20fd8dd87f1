package backends

import (
	"testing"
	"time"
)

func TestRedisCPU(t *testing.T) {
	for _, c := range []struct {
		name, info string
		want       time.Duration
		err        bool
	}{
		{
			name: "redis 7",
			info: "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250001\r\nused_cpu_sys_children:0.000100\r\nused_cpu_user_children:0.010000\r\n" +
				"used_cpu_sys_main_thread:1.400000\r\nused_cpu_user_main_thread:2.200000\r\n",
			want: 3760101 * time.Microsecond,
		},
		{
			name: "idle server",
			info: "# CPU\nused_cpu_sys:0.000000\nused_cpu_user:0.000000\nused_cpu_sys_children:0.000000\nused_cpu_user_children:0.000000\n",
			want: 0,
		},
		{
			name: "main thread fields are not the totals",
			info: "used_cpu_sys_main_thread:9\nused_cpu_user_main_thread:9\nused_cpu_sys:1\nused_cpu_user:1\nused_cpu_sys_children:0\nused_cpu_user_children:0\n",
			want: 2 * time.Second,
		},
		{name: "children missing", info: "used_cpu_sys:1.0\nused_cpu_user:1.0\n", err: true},
		{name: "empty", info: "", err: true},
		{name: "not a number", info: "used_cpu_sys:x\nused_cpu_user:1\nused_cpu_sys_children:0\nused_cpu_user_children:0\n", err: true},
		{name: "negative", info: "used_cpu_sys:-1\nused_cpu_user:1\nused_cpu_sys_children:0\nused_cpu_user_children:0\n", err: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := RedisCPU(c.info)
			if c.err {
				if err == nil {
					t.Fatalf("RedisCPU = %v, want an error", got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("RedisCPU = %v, %v, want %v", got, err, c.want)
			}
		})
	}
}

func TestSelfCPU_grows(t *testing.T) {
	first, err := SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has counted more processor time: getrusage
	// counts a running thread's time exactly, so this ends.
	for {
		now, err := SelfCPU()
		if err != nil {
			t.Fatal(err)
		}
		if now > first {
			return
		}
	}
}

func TestStatTicks(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime …
	for _, c := range []struct {
		name, stat string
		want       int64
		err        bool
	}{
		{name: "mariadbd", stat: "4242 (mariadbd) S 1 4242 4242 0 -1 4194560 9000 0 3 0 150 40 7 3 20 0 30 0", want: 200},
		{name: "name with spaces and parentheses", stat: "17 (post (gres: x) y) R 1 17 17 0 -1 0 0 0 0 0 1 2 3 4 20 0 1 0", want: 10},
		{name: "children only", stat: "9 (redis-server) S 1 9 9 0 -1 0 0 0 0 0 0 0 5 6 20 0 4 0", want: 11},
		{name: "truncated", stat: "9 (redis-server) S 1 9 9 0 -1 0 0 0 0 0 1 2", err: true},
		{name: "not a number", stat: "9 (x) S 1 9 9 0 -1 0 0 0 0 0 1 x 3 4 20 0 4 0", err: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := parseStat(c.stat)
			var got int64
			if err == nil {
				got, err = statTicks(f)
			}
			if c.err {
				if err == nil {
					t.Fatalf("ticks = %d, want an error", got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ticks = %d, %v, want %d", got, err, c.want)
			}
		})
	}
}
