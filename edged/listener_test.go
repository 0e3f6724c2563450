package edged

import (
	"net"
	"testing"
	"time"
)

// deadlineConn records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	set []time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

// TestReadDeadlineCoalescing: a read deadline is never earlier than asked nor more
// than deadlineSlack later, and deadlines that the one in force already satisfies do
// not reach the connection.
func TestReadDeadlineCoalescing(t *testing.T) {
	base := time.Now()
	at := func(d time.Duration) time.Time { return base.Add(d) }
	tests := []struct {
		name  string
		calls []func(c *trackedConn) error
		asked []time.Time // deadlines asked, in order
		sets  int         // how many reached the connection
	}{
		{"first deadline is set", nil, []time.Time{at(60 * time.Second)}, 1},
		{"later deadlines within the slack are kept", nil,
			[]time.Time{at(60 * time.Second), at(60*time.Second + 300*time.Millisecond), at(60*time.Second + 900*time.Millisecond)}, 1},
		{"a deadline past the one set moves it", nil,
			[]time.Time{at(60 * time.Second), at(62 * time.Second)}, 2},
		{"an earlier deadline moves it", nil,
			[]time.Time{at(60 * time.Second), at(30 * time.Second)}, 2},
		{"no deadline always reaches the connection", nil,
			[]time.Time{at(60 * time.Second), {}, at(60 * time.Second)}, 3},
		{"SetDeadline forgets the read deadline", []func(c *trackedConn) error{
			func(c *trackedConn) error { return c.SetReadDeadline(at(60 * time.Second)) },
			func(c *trackedConn) error { return c.SetDeadline(time.Time{}) },
		}, []time.Time{at(60 * time.Second)}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dc := &deadlineConn{}
			c := &trackedConn{Conn: dc}
			for _, call := range tt.calls {
				if err := call(c); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range tt.asked {
				if err := c.SetReadDeadline(d); err != nil {
					t.Fatal(err)
				}
				got := dc.set[len(dc.set)-1]
				switch {
				case d.IsZero() && !got.IsZero():
					t.Fatalf("asked no deadline; connection has %v", got)
				case !d.IsZero() && (got.Before(d) || got.Sub(d) > deadlineSlack):
					t.Fatalf("asked deadline %v; connection has %v (slack %v)", d.Sub(base), got.Sub(base), deadlineSlack)
				}
			}
			if len(dc.set) != tt.sets {
				t.Fatalf("%d deadlines reached the connection; want %d", len(dc.set), tt.sets)
			}
		})
	}
}
