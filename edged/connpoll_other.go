//go:build !linux

package edged

import "net"

// connPoller is Linux-only; elsewhere connections wait in the runtime's poller.
type connPoller struct{}

func newConnPoller() (*connPoller, error) { return nil, nil }

func (*connPoller) adopt(c net.Conn) net.Conn { return c }
func (*connPoller) close()                    {}
