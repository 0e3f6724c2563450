//go:build !linux

package edged

import "testing"

type ceilingServer struct{ addr string }

// startCeiling is Linux-only, as is the pinning it runs with.
func startCeiling(b testing.TB, addr, host, path string) *ceilingServer {
	b.Fatal("the ceiling server needs Linux: set ARMOR_BENCH_PIN=0")
	return nil
}

func (s *ceilingServer) start()       {}
func (s *ceilingServer) stopServing() {}
