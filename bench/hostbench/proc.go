package main

import (
	"bytes"
	"fmt"
	"github.com/agentd-dev/agentd/bench/internal/procstat"
	"os"
	"strconv"
	"strings"
	"time"
)

// rssBytes returns VmRSS of pid from /proc/<pid>/status, or 0.
func rssBytes(pid int) int64 { return statusBytes(pid, "VmRSS:") }

// rssSplit returns the anonymous (heap, stacks) and file-backed (the
// binary's pages) parts of pid's RSS.
func rssSplit(pid int) (anon, file int64) {
	return statusBytes(pid, "RssAnon:"), statusBytes(pid, "RssFile:")
}

// procIO returns the read and write system calls pid has made (syscr and
// syscw of /proc/<pid>/io).
func procIO(pid int) (reads, writes int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(": "))
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(string(v), 10, 64)
		switch string(k) {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

// quantiles of a latency sample.
type quantiles struct{ p50, p90, p99, p999 time.Duration }

// us formats d in microseconds, or milliseconds from 10ms up.
func us(d time.Duration) string {
	if d >= 10*time.Millisecond {
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// The measurements shared with the other benchmarks.
var (
	procCPU    = procstat.CPU
	selfCPU    = procstat.SelfCPU
	percentile = procstat.Percentile
	median     = procstat.Median
	mib        = procstat.MiB
)

func statusBytes(pid int, key string) int64 {
	return procstat.StatusBytes(pid, strings.TrimSuffix(key, ":"))
}
