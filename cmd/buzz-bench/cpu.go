package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, 100 on every Linux the bench targets.
const clockTicks = 100

// pidGroup is one name of --pids and the processes it sums.
type pidGroup struct {
	Name string
	PIDs []int
}

// parsePIDs parses "relay=PID,postgres=PID1+PID2".
func parsePIDs(s string) ([]pidGroup, error) {
	if s == "" {
		return nil, nil
	}
	var out []pidGroup
	for part := range strings.SplitSeq(s, ",") {
		name, list, ok := strings.Cut(part, "=")
		if !ok || name == "" || list == "" {
			return nil, errf("--pids: %q is not name=PID[+PID…]", part)
		}
		g := pidGroup{Name: name}
		for p := range strings.SplitSeq(list, "+") {
			pid, err := strconv.Atoi(p)
			if err != nil || pid <= 0 {
				return nil, errf("--pids: %q is not a process id", p)
			}
			g.PIDs = append(g.PIDs, pid)
		}
		out = append(out, g)
	}
	return out, nil
}

// procStat reads utime, stime, cutime, cstime (ticks) and the parent pid.
func procStat(pid int) (self, children int64, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // comm may hold spaces
	if i < 0 {
		return 0, 0, 0, errf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, 0, errf("/proc/%d/stat: too few fields", pid)
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k-3], 10, 64); return v }
	return n(14) + n(15), n(16) + n(17), int(n(4)), nil
}

// cpuTicks sums a group's CPU: each pid's own time, its reaped children's,
// and the own time of its live children (PostgreSQL backends under the postmaster).
func cpuTicks(g pidGroup) int64 {
	want := map[int]bool{}
	var total int64
	for _, pid := range g.PIDs {
		self, kids, _, err := procStat(pid)
		if err == nil {
			total += self + kids
			want[pid] = true
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || want[pid] {
			continue
		}
		self, _, ppid, err := procStat(pid)
		if err == nil && want[ppid] {
			total += self
		}
	}
	return total
}

// cpuSample is a reading of every group at one instant.
type cpuSample struct {
	at    time.Time
	ticks map[string]int64
}

func sampleCPU(groups []pidGroup) cpuSample {
	s := cpuSample{at: time.Now(), ticks: map[string]int64{}}
	for _, g := range groups {
		s.ticks[g.Name] = cpuTicks(g)
	}
	return s
}

// cpuUse is one group's CPU over a phase.
type cpuUse struct {
	Seconds   float64 `json:"cpu_seconds"`
	PctOfCore float64 `json:"pct_of_core"`
}

// cpuSince reports what each group used since before. Live children that
// exited and were not reaped in between are missed.
func cpuSince(groups []pidGroup, before cpuSample) map[string]cpuUse {
	if len(groups) == 0 {
		return nil
	}
	after := sampleCPU(groups)
	wall := after.at.Sub(before.at).Seconds()
	out := map[string]cpuUse{}
	for _, g := range groups {
		secs := float64(max(after.ticks[g.Name]-before.ticks[g.Name], 0)) / clockTicks
		pct := 0.0
		if wall > 0 {
			pct = round1(100 * secs / wall)
		}
		out[g.Name] = cpuUse{Seconds: round3(secs), PctOfCore: pct}
	}
	return out
}
