//go:build race

package event

// raceEnabled: the race detector slows btcec's field arithmetic about
// thirtyfold, so the randomised verification tests run fewer rounds under
// -race (scripts/test.sh); a plain go test runs them all.
const raceEnabled = true
