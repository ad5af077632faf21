package search

import (
	"strconv"
	"strings"
	"sync/atomic"
)

// Bounds of the rank window (docs/PROTOCOL.md §12.4): a statement ranks only the
// newest RankWindow matches of its filter, so its cost does not grow with
// how common the word is.
const (
	DefaultRankWindow = 1000
	MinRankWindow     = 100
	MaxRankWindow     = 10_000
)

// EnvRankWindow is the variable that sets the rank window of the process.
const EnvRankWindow = "BUZZ_SEARCH_RANK_WINDOW"

// SettingsError is an invalid BUZZ_SEARCH_ variable, worded like the
// errors of package config: "invalid <VARIABLE>: <reason>".
type SettingsError struct {
	Variable string
	Reason   string
}

func (e *SettingsError) Error() string { return "invalid " + e.Variable + ": " + e.Reason }

// Settings are the BUZZ_SEARCH_ variables of the relay.
type Settings struct {
	// RankWindow is BUZZ_SEARCH_RANK_WINDOW: DefaultRankWindow when unset.
	RankWindow int
}

// LoadSettings reads the BUZZ_SEARCH_ variables through getenv (nil reads
// nothing). Empty or blank values mean unset; an invalid value is a
// *SettingsError ("invalid BUZZ_SEARCH_RANK_WINDOW: …"), never a fallback.
func LoadSettings(getenv func(string) string) (Settings, error) {
	s := Settings{RankWindow: DefaultRankWindow}
	if getenv == nil {
		return s, nil
	}
	v := strings.TrimSpace(getenv(EnvRankWindow))
	if v == "" {
		return s, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < MinRankWindow || n > MaxRankWindow {
		return s, &SettingsError{Variable: EnvRankWindow, Reason: "must be an integer in " +
			strconv.Itoa(MinRankWindow) + "..=" + strconv.Itoa(MaxRankWindow) + " (matches ranked per search)"}
	}
	s.RankWindow = n
	return s, nil
}

// processRankWindow is the window of Searchers whose Config leaves
// RankWindow at 0: DefaultRankWindow until Configure sets it.
var processRankWindow atomic.Int64

func init() { processRankWindow.Store(DefaultRankWindow) }

// Configure validates the BUZZ_SEARCH_ variables (LoadSettings) and makes
// them the defaults of every Searcher built afterwards. The relay calls it
// once at start, next to config.Load; on error nothing changes.
func Configure(getenv func(string) string) error {
	s, err := LoadSettings(getenv)
	if err != nil {
		return err
	}
	processRankWindow.Store(int64(s.RankWindow))
	return nil
}

// clampRankWindow returns w bounded to MinRankWindow..MaxRankWindow, or the
// process default when w is 0 or less.
func clampRankWindow(w int) int {
	if w <= 0 {
		return int(processRankWindow.Load())
	}
	return min(max(w, MinRankWindow), MaxRankWindow)
}
