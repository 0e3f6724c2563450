//go:build !race

package edged

const raceEnabled = false
