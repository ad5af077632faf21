package main

import (
	"log/slog"
	"os"
	"runtime"
	"strconv"
)

// tuneProcs sets how many processors run the relay's Go code at once
// (docs/OPERATIONS.md "Processors"). With its private cluster, PostgreSQL
// runs on the same processors, and one PostgreSQL backend does every
// write of the process: the relay then takes one processor fewer than Go
// would, so that backend always finds one free. An operator's GOMAXPROCS
// wins, and a relay on an external database keeps Go's default. A
// GOMAXPROCS that is not a positive integer is ignored, as Go ignores it,
// with a warning.
func tuneProcs(log *slog.Logger, private bool) {
	n := runtime.GOMAXPROCS(0)
	setBy := "go"
	env := os.Getenv("GOMAXPROCS")
	if v, err := strconv.Atoi(env); env != "" && (err != nil || v < 1) {
		log.Warn("GOMAXPROCS is not a positive integer: ignored", slog.String("GOMAXPROCS", env))
		env = ""
	}
	switch {
	case env != "":
		setBy = "GOMAXPROCS"
	case private && n > 1:
		n--
		runtime.GOMAXPROCS(n)
		setBy = "private cluster"
	}
	log.Info("processors", slog.Int("gomaxprocs", n), slog.String("set_by", setBy))
}
