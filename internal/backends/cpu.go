package backends

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SelfCPU returns the user and system processor time this process has used
// so far, all its threads together (getrusage RUSAGE_SELF).
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("backends: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// redisCPUFields are the fields of a Redis INFO cpu section that add up to
// the server's processor time: its own, user and system, and that of the
// children it forked (RDB saves, AOF rewrites), which a durable server's
// writes cost as well.
var redisCPUFields = []string{"used_cpu_sys", "used_cpu_user", "used_cpu_sys_children", "used_cpu_user_children"}

// RedisCPU returns the processor time a Redis (or Valkey) server reports in
// the text of INFO cpu: used_cpu_sys + used_cpu_user, of the server and of
// its children. Each is in seconds with microsecond decimals; a section
// missing any of them is an error.
func RedisCPU(info string) (time.Duration, error) {
	got := map[string]time.Duration{}
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		for _, f := range redisCPUFields {
			if k != f {
				continue
			}
			s, err := strconv.ParseFloat(v, 64)
			if err != nil || s < 0 || math.IsInf(s, 0) {
				return 0, fmt.Errorf("backends: INFO cpu: %s:%s is not a number of seconds", k, v)
			}
			got[k] = time.Duration(math.Round(s*1e6)) * time.Microsecond
		}
	}
	var sum time.Duration
	for _, f := range redisCPUFields {
		d, ok := got[f]
		if !ok {
			return 0, fmt.Errorf("backends: INFO cpu has no %s", f)
		}
		sum += d
	}
	return sum, nil
}
