package search

// Bounds of the rank window (docs/PROTOCOL.md §12.4): a statement ranks only the
// newest RankWindow matches of its filter, so its cost does not grow with
// how common the word is. The relay's window is BUZZ_SEARCH_RANK_WINDOW
// (config.Config.SearchRankWindow), passed in through Config.
const (
	DefaultRankWindow = 1000
	MinRankWindow     = 100
	MaxRankWindow     = 10_000
)

// clampRankWindow returns w bounded to MinRankWindow..MaxRankWindow, or
// DefaultRankWindow when w is 0 or less.
func clampRankWindow(w int) int {
	if w <= 0 {
		return DefaultRankWindow
	}
	return min(max(w, MinRankWindow), MaxRankWindow)
}
