// Package s3test starts a real S3 server (cmd/s3server: rclone's serve s3) on
// loopback for tests.
//
// The server binary is built once into the user's cache directory, keyed by go.mod,
// go.sum, the server's source and the Go version, or taken from $ARMOR_S3SERVER when set
// (a path relative to the module root, or absolute). CI prebuilds it once with
//
//	go build -o bin/s3server ./cmd/s3server
//
// and runs the tests with ARMOR_S3SERVER=bin/s3server.
package s3test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Server is a running S3 server. Each bucket is a directory under Dir.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	KeyID    string
	Secret   string
	Dir      string
}

// Start starts a server on 127.0.0.1 with a kernel-chosen port, waits until it answers,
// and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	s := &Server{
		KeyID:  "armor-test-key",
		Secret: "armor-test-SECRET-" + randomHex(8),
		Dir:    t.TempDir(),
	}
	cmd := exec.Command(bin, "serve", "s3", "--config=/dev/null", "--addr", "127.0.0.1:0",
		"--auth-key", s.KeyID+","+s.Secret, s.Dir)
	cmd.Env = append(os.Environ(), "RCLONE_CONFIG=/dev/null")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("s3test: start %s: %v", bin, err)
	}
	log := &syncBuffer{}
	found := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		scanLog(stderr, log, found)
		close(exited)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("s3test: log of the S3 server at %s:\n%s", s.Endpoint, log)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	select {
	case s.Endpoint = <-found:
	case <-exited:
		t.Fatalf("s3test: %s exited before listening; its log:\n%s", bin, log)
	case <-time.After(60 * time.Second):
		t.Fatalf("s3test: %s did not report its address within 60s; its log:\n%s", bin, log)
	}
	if err := waitAnswer(s.Endpoint); err != nil {
		t.Fatalf("s3test: server at %s: %v; its log:\n%s", s.Endpoint, err, log)
	}
	return s
}

// Remote returns the rclone connection string for bucket/prefix on this server (prefix
// may be empty), creating the bucket.
func (s *Server) Remote(bucket, prefix string) string {
	if err := os.MkdirAll(filepath.Join(s.Dir, bucket), 0o755); err != nil {
		panic(fmt.Sprintf("s3test: create bucket: %v", err))
	}
	return s.RemoteWith(s.KeyID, s.Secret, bucket, prefix)
}

// RemoteWith is Remote with other credentials, for tests of refused access. It does not
// create the bucket.
func (s *Server) RemoteWith(keyID, secret, bucket, prefix string) string {
	return EndpointRemote(s.Endpoint, keyID, secret, bucket, prefix)
}

// EndpointRemote is the rclone connection string for bucket/prefix of an S3 endpoint.
func EndpointRemote(endpoint, keyID, secret, bucket, prefix string) string {
	p := bucket
	if prefix != "" {
		p += "/" + prefix
	}
	return fmt.Sprintf(":s3,provider=Rclone,endpoint='%s',access_key_id='%s',secret_access_key='%s':%s",
		endpoint, keyID, secret, p)
}

var startLine = regexp.MustCompile(`Starting s3 server on \[(http://127\.0\.0\.1:[0-9]+)/?`)

// scanLog copies the server's log into log and sends the endpoint once it is announced.
func scanLog(r io.Reader, log *syncBuffer, found chan<- string) {
	sc := bufio.NewScanner(r)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		log.WriteLine(line)
		if m := startLine.FindStringSubmatch(line); m != nil && !sent {
			found <- m[1]
			sent = true
		}
	}
	_, _ = io.Copy(io.Discard, r) // after an over-long line
}

// waitAnswer polls endpoint until it answers HTTP at all.
func waitAnswer(endpoint string) error {
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// binary returns the server binary, building it on first use.
func binary() (string, error) {
	buildOnce.Do(func() { buildPath, buildErr = findOrBuild() })
	return buildPath, buildErr
}

func findOrBuild() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build the S3 test server: no go on PATH (or set ARMOR_S3SERVER to a built server): %w", err)
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module: go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	if p := os.Getenv("ARMOR_S3SERVER"); p != "" {
		// Tests run in their package's directory: a relative path is the module's.
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("ARMOR_S3SERVER: %w (build it with `go build -o %s ./cmd/s3server`)", err, p)
		}
		return p, nil
	}
	key, err := sourceKey(root)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "armor-test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "s3server-"+key)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	// Several test processes may want it at once: one builds, the others wait.
	unlock, err := lock(filepath.Join(dir, "s3server.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	build := exec.Command(goBin, "build", "-o", tmp, "./cmd/s3server")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build the S3 test server (go build ./cmd/s3server): %w\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// sourceKey identifies the server's build inputs: go.sum, its source and the Go version.
func sourceKey(root string) (string, error) {
	h := sha256.New()
	for _, name := range []string{"go.sum", "go.mod", "cmd/s3server/main.go"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return "", fmt.Errorf("hash the S3 server's inputs: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	h.Write([]byte(runtime.Version()))
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// syncBuffer collects the server's log for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() < 64<<10 {
		b.buf.WriteString(s)
		b.buf.WriteByte('\n')
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StoreKind is one kind of fresh, empty store a test runs against.
type StoreKind struct {
	Name string
	// Remote returns the rclone remote of a new empty store of this kind.
	Remote func(t *testing.T) string
}

// StoreKinds are the stores a test of pushing or checking runs against: a local
// directory, and a bucket on a real S3 server started for the calling test.
func StoreKinds(t *testing.T) []StoreKind {
	t.Helper()
	srv := Start(t)
	var buckets atomic.Int64
	return []StoreKind{
		{"local", func(t *testing.T) string { return filepath.Join(t.TempDir(), "store") }},
		{"s3", func(t *testing.T) string {
			return srv.Remote(fmt.Sprintf("bucket%d", buckets.Add(1)), "armor/releases")
		}},
	}
}
