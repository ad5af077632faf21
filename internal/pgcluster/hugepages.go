package pgcluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// Huge pages for the private cluster's shared memory (docs/OPERATIONS.md
// "Huge pages"). PostgreSQL's default huge_pages = try puts its shared memory
// on the machine's reserved huge pages when enough of them are free, and on
// normal 4 kB pages otherwise, without a word. On a virtual machine where a
// process's first touch of a page traps to the hypervisor and every system
// call empties the TLB, normal pages cost the cluster about a fifth of its CPU
// an event (docs/PERFORMANCE.md "Huge pages for the private cluster"). The
// pool is vm.nr_hugepages, the machine's to set, so the relay only says at
// each start which pages the cluster got and, on normal pages, how many huge
// pages would hold its shared memory.

// hugePagesSetting is PostgreSQL's runtime-computed count of the huge pages
// its shared memory takes (PostgreSQL 15 and later).
const hugePagesSetting = "shared_memory_size_in_huge_pages"

// hugePagesNeeded asks the stopped cluster how many huge pages its shared
// memory would take, with the settings the coming start will use. 0 when the
// server cannot tell: an older server, or -1 for a kernel without huge pages.
// postgres -C answers for runtime-computed settings only while the server is
// down, so this runs before the start.
func (c *Cluster) hugePagesNeeded(ctx context.Context) int64 {
	out, err := c.run(ctx, "postgres", "-D", c.dataDir, "-C", hugePagesSetting)
	if err != nil {
		c.log.Debug("could not compute the huge pages of shared memory",
			slog.String("err", err.Error()), slog.String("output", string(out)))
		return 0
	}
	words := strings.Fields(string(out)) // the value is the last word printed
	if len(words) == 0 {
		return 0
	}
	n, err := strconv.ParseInt(words[len(words)-1], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// reportHugePages logs which pages the started postmaster's shared memory is
// on (hugePagesNote), need being hugePagesNeeded's answer before the start.
func (c *Cluster) reportHugePages(ctx context.Context, need int64) {
	pid, _, _, alive := c.runningPostmaster()
	if !alive {
		return
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	meminfo, _ := os.ReadFile("/proc/meminfo")
	if level, msg, attrs := hugePagesNote(string(status), string(meminfo), need); msg != "" {
		c.log.LogAttrs(ctx, level, msg, attrs...)
	}
}

// hugePagesNote is the start's record of the shared memory's pages, from the
// postmaster's /proc/PID/status, the machine's /proc/meminfo and the pages
// the cluster needs (0 when unknown, which says nothing on normal pages):
//   - on huge pages (HugetlbPages above 0): Info, with the count it takes;
//   - on normal pages, no huge page reserved: Info, with the sysctl that
//     would reserve enough;
//   - on normal pages, some reserved but too few free: Warn, since an
//     operator reserved them for this and PostgreSQL fell back, with the
//     count that would leave enough beside what others hold.
func hugePagesNote(status, meminfo string, need int64) (slog.Level, string, []slog.Attr) {
	usedKB := procField(status, "HugetlbPages:")
	total := procField(meminfo, "HugePages_Total:")
	free := procField(meminfo, "HugePages_Free:")
	see := slog.String("see", `docs/OPERATIONS.md "Huge pages"`)
	switch {
	case usedKB > 0: // the pages touched so far; the mapping takes need
		var attrs []slog.Attr
		if need > 0 {
			attrs = append(attrs, slog.Int64("huge_pages", need))
		}
		return slog.LevelInfo, "shared memory on huge pages", attrs
	case need <= 0:
		return slog.LevelInfo, "", nil
	case total == 0:
		return slog.LevelInfo, "shared memory on normal pages: the machine reserves no huge pages", []slog.Attr{
			slog.Int64("huge_pages_needed", need),
			slog.String("to_reserve", fmt.Sprintf("sysctl -w vm.nr_hugepages=%d", need)), see}
	default:
		return slog.LevelWarn, "shared memory on normal pages: too few huge pages free", []slog.Attr{
			slog.Int64("huge_pages_needed", need), slog.Int64("huge_pages_free", free),
			slog.Int64("huge_pages_total", total),
			slog.String("to_reserve", fmt.Sprintf("sysctl -w vm.nr_hugepages=%d", total-free+need)), see}
	}
}

// procField is the first number after name in a /proc file of "name: value"
// lines ("HugetlbPages:      2048 kB" gives 2048); 0 when absent.
func procField(text, name string) int64 {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		return n
	}
	return 0
}
