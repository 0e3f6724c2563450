package gen

import "sync/atomic"

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) add() int { return int(c.n.Add(1)) }
