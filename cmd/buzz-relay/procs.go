package main

import (
	"log/slog"
	"os"
	"runtime"
)

// tuneProcs sets how many processors run the relay's Go code at once
// (docs/OPERATIONS.md "Processors"). With its private cluster, PostgreSQL
// runs on the same processors, and one PostgreSQL backend does every
// write of the process: the relay then takes one processor fewer than Go
// would, so that backend always finds one free. An operator's GOMAXPROCS
// wins, and a relay on an external database keeps Go's default.
func tuneProcs(log *slog.Logger, private bool) {
	n := runtime.GOMAXPROCS(0)
	setBy := "go"
	switch {
	case os.Getenv("GOMAXPROCS") != "":
		setBy = "GOMAXPROCS"
	case private && n > 1:
		n--
		runtime.GOMAXPROCS(n)
		setBy = "private cluster"
	}
	log.Info("processors", slog.Int("gomaxprocs", n), slog.String("set_by", setBy))
}
