package edged

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/armor-apt/armor/edged/internal/connpoll"
)

// TestCloseUnused: at shutdown the tracking listener closes the connections that never
// sent a byte and leaves those that did, over either poller.
func TestCloseUnused(t *testing.T) {
	for _, poller := range []string{"go", "edged"} {
		t.Run(poller, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if poller == "edged" {
				pl, err := connpoll.NewListener(inner, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pl.Stop)
				inner = pl
			}
			ln := newTrackingListener(inner)
			defer ln.Close()
			pair := func() (server, client net.Conn) {
				t.Helper()
				client, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { client.Close() })
				_ = client.SetDeadline(time.Now().Add(5 * time.Second))
				if server, err = ln.Accept(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { server.Close() })
				return server, client
			}
			usedServer, usedClient := pair()
			_, spareClient := pair()
			if _, err := usedClient.Write([]byte("GET")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(usedServer, make([]byte, 3)); err != nil {
				t.Fatal(err)
			}

			ln.closeUnused()
			if n, err := spareClient.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("spare connection after closeUnused: read %d bytes, %v; want it closed (io.EOF)", n, err)
			}
			if _, err := usedServer.Write([]byte("200")); err != nil {
				t.Fatalf("write on a used connection after closeUnused: %v", err)
			}
			if _, err := io.ReadFull(usedClient, make([]byte, 3)); err != nil {
				t.Fatalf("used connection after closeUnused: %v; want it open", err)
			}
		})
	}
}
