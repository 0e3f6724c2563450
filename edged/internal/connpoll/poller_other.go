//go:build !linux

package connpoll

import (
	"errors"
	"fmt"
	"net"
)

// poller is Linux-only: elsewhere NewListener fails and edged keeps Go's poller.
type poller struct{}

func newPoller() (*poller, error) {
	return nil, fmt.Errorf("edged's connection poller needs Linux: %w", errors.ErrUnsupported)
}

func (*poller) adopt(c net.Conn) net.Conn { return c }
func (*poller) close()                    {}
