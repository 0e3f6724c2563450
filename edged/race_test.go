//go:build race

package edged

// raceEnabled: the race detector is on. It randomises the scheduler's run queue order.
const raceEnabled = true
