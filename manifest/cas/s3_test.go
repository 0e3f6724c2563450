package cas_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/armor-apt/armor/manifest/cas"
	"github.com/armor-apt/armor/manifest/cas/storetest"
	"github.com/armor-apt/armor/testdata/s3server/s3test"
)

// openS3 opens a store on a fresh prefix of srv's bucket "armor".
func openS3(t testing.TB, srv *s3test.Server, prefix string) *cas.Rclone {
	t.Helper()
	s, err := cas.OpenRclone(context.Background(), srv.Remote("armor", prefix))
	if err != nil {
		t.Fatalf("OpenRclone(S3 %s) = %v", srv.Endpoint, err)
	}
	return s
}

func TestRcloneS3(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	n := 0
	storetest.Run(t, func(t *testing.T) cas.Store {
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
	s, err := cas.OpenRclone(context.Background(), remote)
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
	if created || !errors.Is(err, cas.ErrDigestMismatch) {
		t.Fatalf("multipart Put of mismatching content = %v, %v; want ErrDigestMismatch", created, err)
	}
	storetest.AssertAbsent(t, s, wrong.Sum)
}
