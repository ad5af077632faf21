package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// The garbage collector's defaults for the relay (docs/OPERATIONS.md
// "Memory and the garbage collector"). Go's own default, GOGC=100 with no
// memory limit, collects whenever the heap doubles; the relay's live heap
// is small and its garbage (decoded events, encoded answers) is produced
// per request, so it collects a fifth as often and bounds the heap by a
// soft limit instead.
const (
	// defaultGCPercent is GOGC when the environment does not set it.
	defaultGCPercent = 400
	// memoryLimitRatio is the share of the memory the process may use
	// (its cgroup's limit, or the machine's memory) taken as GOMEMLIMIT
	// when the environment sets neither GOMEMLIMIT nor AUTOMEMLIMIT. Half,
	// because the private cluster's PostgreSQL shares that memory.
	memoryLimitRatio = 0.5
)

// tuneGC applies those defaults, leaving alone what the operator set with
// Go's own variables, and logs the values in force.
func tuneGC(log *slog.Logger) {
	gogc := os.Getenv("GOGC")
	if gogc == "" {
		debug.SetGCPercent(defaultGCPercent)
		gogc = strconv.Itoa(defaultGCPercent)
	}
	limit, err := memlimit.Set(memlimit.WithRatio(memoryLimitRatio),
		memlimit.WithProvider(memlimit.ApplyFallback(memlimit.FromCgroup, memlimit.FromSystem)))
	if err != nil {
		log.Warn("GOMEMLIMIT not set", slog.String("err", err.Error()))
	}
	log.Info("garbage collector", slog.String("gogc", gogc), slog.Int64("memory_limit_bytes", limit))
}
