//go:build !race

package event

const raceEnabled = false
