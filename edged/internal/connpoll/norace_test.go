//go:build !race

package connpoll

const raceEnabled = false
