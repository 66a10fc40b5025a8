// Package procstat reads what the benchmarks measure of a process — its
// memory and CPU time from /proc — and summarises samples. It is for the
// programs under bench/ only.
package procstat

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/internal/proc"
)

// StatusBytes returns a kB field (VmRSS, RssAnon, RssFile, …) of
// /proc/<pid>/status in bytes, or 0.
func StatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			if f := bytes.Fields(v); len(f) >= 1 {
				kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// CPU returns the user plus system CPU time of pid, all its threads, or
// 0 when it cannot be read.
func CPU(pid int) time.Duration {
	s, err := proc.ReadStat(pid)
	if err != nil {
		return 0
	}
	return s.CPU()
}

// SelfCPU returns this process's user plus system CPU time.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Percentile returns the nearest-rank p-th percentile of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// Median returns the median of v, 0 when it is empty.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// MiB formats n bytes in MiB, "n/a" for 0.
func MiB(n int64) string {
	if n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// Faults returns how many minor page faults pid took, or 0 when it cannot
// be read.
func Faults(pid int) uint64 {
	s, err := proc.ReadStat(pid)
	if err != nil {
		return 0
	}
	return s.MinFlt
}
