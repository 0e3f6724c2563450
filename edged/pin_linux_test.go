package edged

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// pinProcess sets the CPU affinity of every thread of this process to cpu, and returns
// the function that gives them back the affinity they had.
func pinProcess(b *testing.B, cpu int) (restore func()) {
	b.Helper()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		b.Fatalf("read CPU affinity: %v", err)
	}
	set.Set(cpu)
	setAffinity(b, &set)
	return func() { setAffinity(b, &old) }
}

// setAffinity sets the affinity of every thread. Linux sets it per thread, and a new
// thread inherits its creator's: a second pass catches a thread started from one the
// first pass had not reached.
func setAffinity(b *testing.B, set *unix.CPUSet) {
	b.Helper()
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				b.Fatalf("set CPU affinity of thread %d: %v", tid, err)
			}
		}
	}
}
