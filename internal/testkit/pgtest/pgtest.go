// Package pgtest starts a real PostgreSQL server for tests, from Debian's postgresql
// package (the binaries under /usr/lib/postgresql/*/bin; .ci/install-deps installs it).
//
// A server is a fresh cluster (initdb) in a temporary directory, listening on 127.0.0.1
// with a free port and its unix socket in that directory, with fsync off. A test package
// shares one server, started on first use and stopped by Main from its TestMain; each
// test gets a database of its own from Database. A test that stops the server on purpose
// starts its own with Start.
//
// initdb and postgres refuse to run as root: as root the kit runs them as the postgres
// user, on a directory that user owns.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL cluster.
type Server struct {
	dir  string // owns data/ and the socket
	bin  string
	cred *syscall.Credential
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
}

var (
	shared    *Server
	sharedErr error
	sharedMu  sync.Mutex
	inMain    atomic.Bool
	dbCounter atomic.Int64
)

// Main runs a test package's tests and then stops its shared server. Call it from
// TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	inMain.Store(true)
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		shared.remove()
	}
	return code
}

// Shared returns the package's server, started on first use. The package must call Main
// from its TestMain, or the server would outlive the tests.
func Shared(t testing.TB) *Server {
	t.Helper()
	if !inMain.Load() {
		t.Fatal("pgtest: call os.Exit(pgtest.Main(m)) from the package's TestMain first")
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = start()
	}
	if sharedErr != nil {
		t.Fatalf("pgtest: %v", sharedErr)
	}
	return shared
}

// Database creates an empty database on the package's shared server for t and returns
// its URL; it is dropped when t ends.
func Database(t testing.TB) string {
	t.Helper()
	return Shared(t).Database(t)
}

// Start starts a server of t's own, stopped and removed when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		s.remove()
	})
	return s
}

// URL returns the URL of database db on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Port returns the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// Database creates an empty database for t and returns its URL. It is not dropped: the
// whole cluster goes when the server stops.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbCounter.Add(1))
	if err := s.exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return s.URL(name)
}

// exec runs one statement on the postgres database.
func (s *Server) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Stop shuts the server down (fast shutdown: connections are closed) and waits for it.
// Its data stays: Restart brings it back on the same port.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Kill kills the server as a crash would: SIGKILL to the postmaster and each of its
// processes, so nothing is shut down cleanly. Restart brings it back (with crash
// recovery) on the same port.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	// The backends are the postmaster's children, in its process group.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts a stopped server again on its port.
func (s *Server) Restart() error {
	if s.running() {
		return nil
	}
	return s.run()
}

func (s *Server) remove() { _ = os.RemoveAll(s.dir) }

// start makes a cluster in a new directory and runs it.
func start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "armor-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			s.remove()
			return nil, fmt.Errorf("running as root, the server must run as the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			s.remove()
			return nil, err
		}
	}
	initdb := s.command("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		s.remove()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for try := 0; ; try++ {
		if s.port, err = freePort(); err != nil {
			s.remove()
			return nil, err
		}
		if err = s.run(); err == nil {
			return s, nil
		}
		if try == 4 {
			s.remove()
			return nil, err
		}
	}
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	cmd.Dir = s.dir
	return cmd
}

// run starts postgres on s.port and waits until it accepts connections.
func (s *Server) run() error {
	cmd := s.command("postgres", "-D", s.data(), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	// If the test binary dies (a timeout's panic skips every cleanup), the postmaster
	// gets SIGQUIT, its immediate shutdown, instead of running on.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	cmd.SysProcAttr.Setpgid = true // its own process group, which Kill kills whole
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done, s.log = cmd, done, log
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-done:
			s.mu.Lock()
			s.cmd = nil
			s.mu.Unlock()
			return fmt.Errorf("postgres exited at start: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("postgres did not accept connections within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// binDir finds the newest /usr/lib/postgresql/*/bin holding postgres and initdb.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server under /usr/lib/postgresql/*/bin: install Debian's postgresql package (.ci/install-deps does)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
