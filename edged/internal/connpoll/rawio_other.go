//go:build !linux

package connpoll

import "net"

// rawIO is Linux-only; elsewhere connections use net.Conn's Read and Write.
type rawIO struct{}

func newRawIO(net.Conn) *rawIO { return nil }

func (*rawIO) read([]byte) (int, error)  { panic("unreachable") }
func (*rawIO) write([]byte) (int, error) { panic("unreachable") }
