package store_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
)

// openS3 opens a store on a fresh prefix of srv's bucket "armor".
func openS3(t testing.TB, srv *s3test.Server, prefix string) *store.Rclone {
	t.Helper()
	s, err := store.OpenRclone(context.Background(), srv.Remote("armor", prefix))
	if err != nil {
		t.Fatalf("OpenRclone(S3 %s) = %v", srv.Endpoint, err)
	}
	return s
}

func TestRcloneS3(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		return openS3(t, srv, "suite"+string(rune('a'+n)))
	})
}

// TestRcloneS3Multipart stores objects larger than the upload cutoff, which rclone sends
// as multipart uploads: a mismatch found in the last part must still store nothing.
func TestRcloneS3Multipart(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	remote := strings.Replace(srv.Remote("armor", "multipart"), ":s3,", ":s3,upload_cutoff=5Mi,chunk_size=5Mi,", 1)
	s, err := store.OpenRclone(context.Background(), remote)
	if err != nil {
		t.Fatal(err)
	}
	o := storetest.RandomObject(11, 11<<20+3)
	if !storetest.Put(t, s, o) {
		t.Fatal("multipart Put reported created=false")
	}
	storetest.AssertContent(t, s, o)

	bad := bytes.Clone(o.Data)
	bad[len(bad)-1] ^= 1
	wrong := storetest.RandomObject(12, len(bad))
	created, err := s.Put(context.Background(), wrong.Sum, int64(len(bad)), bytes.NewReader(bad))
	if created || !errors.Is(err, store.ErrDigestMismatch) {
		t.Fatalf("multipart Put of mismatching content = %v, %v; want ErrDigestMismatch", created, err)
	}
	storetest.AssertAbsent(t, s, wrong.Sum)
}

// TestRcloneAttempts: RcloneOptions.Attempts bounds how often rclone tries a request.
// The endpoint accepts each connection and closes it at once, a fault rclone takes for
// a passing one and retries, with backoff. Each try shows as up to two connections:
// Go's HTTP transport sends a request again, once, when its connection closes before
// any answer. With Attempts 2 this endpoint saw 4 connections.
func TestRcloneAttempts(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	remote := s3test.EndpointRemote("http://"+ln.Addr().String(), "key", "secret", "armor", "attempts")
	s, err := store.OpenRcloneWith(context.Background(), remote, store.RcloneOptions{Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.Open(context.Background(), strings.Repeat("ab", 32), 0, -1)
	if err == nil {
		rc.Close()
		t.Fatal("Open through a closing endpoint succeeded")
	}
	if n := accepted.Load(); n > 2 {
		t.Errorf("with Attempts 1, rclone connected %d times, want one try: at most 2 (err: %v)", n, err)
	}
}
