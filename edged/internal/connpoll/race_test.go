//go:build race

package connpoll

// raceEnabled: the race detector is on. It randomises the scheduler's run queue order.
const raceEnabled = true
