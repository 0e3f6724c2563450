package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/apttest"
)

// aptLoop is apt clients that update and download in a loop until stopped, and count
// what they saw: the load of the fleet tests.
type aptLoop struct {
	mu         sync.Mutex
	updates    int
	downloads  int
	requests   int // apt's Get: and Hit: lines: the requests it made
	errors     int // updates or downloads that failed or printed a problem
	mismatches int // "Hash Sum mismatch" (or a size mismatch) anywhere in apt's output
	problems   []string
	runs       []aptRun          // every run, for the fleet test to tell which a kill met
	debs       map[string]string // file name of each published .deb → its SHA-256
	stop       chan struct{}
	stopOnce   sync.Once
	wg         sync.WaitGroup
}

// aptRun is one apt-get run of a client; problems is empty when it went well.
type aptRun struct {
	client, what string
	start, end   time.Time
	problems     []string
}

func newAptLoop() *aptLoop {
	return &aptLoop{debs: map[string]string{}, stop: make(chan struct{})}
}

// published records a .deb that a release publishes, so a download of it is checked.
func (l *aptLoop) published(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	l.mu.Lock()
	l.debs[filepath.Base(path)] = hex.EncodeToString(s[:])
	l.mu.Unlock()
}

// start runs one client with apt's options until stop: apt-get update, then apt-get
// download pkg, over and over.
func (l *aptLoop) start(t *testing.T, name string, o apttest.Options, pkg string) {
	apt := apttest.New(t, o)
	dir := t.TempDir()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			start := time.Now()
			out, err := apt.Cmd("update").CombinedOutput()
			problems := apt.Problems(string(out))
			if err != nil {
				problems = append(problems, fmt.Sprintf("apt-get update: %v", err))
			}
			l.record(name, "update", start, string(out), problems)
			if err != nil || len(problems) > 0 {
				continue
			}
			os.RemoveAll(dir)
			os.MkdirAll(dir, 0o755)
			start = time.Now()
			cmd := apt.Cmd("download", pkg)
			cmd.Dir = dir
			out, err = cmd.CombinedOutput()
			problems = nil
			if err != nil {
				problems = append(problems, fmt.Sprintf("apt-get download: %v: %s", err, lastLines(out)))
			}
			problems = append(problems, l.checkDownloads(dir)...)
			l.record(name, "download", start, string(out), problems)
		}
	}()
}

// checkDownloads compares what apt downloaded with what was published.
func (l *aptLoop) checkDownloads(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var bad []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		s := sha256.Sum256(b)
		l.mu.Lock()
		want, known := l.debs[e.Name()]
		l.mu.Unlock()
		if err != nil || !known || want != hex.EncodeToString(s[:]) {
			bad = append(bad, fmt.Sprintf("downloaded %s differs from the published package (known %v, %v)", e.Name(), known, err))
		}
	}
	return bad
}

func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], " | ")
}

func (l *aptLoop) record(client, what string, start time.Time, out string, problems []string) {
	end := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, aptRun{client: client, what: what, start: start, end: end, problems: problems})
	if what == "update" {
		l.updates++
	} else {
		l.downloads++
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Get:") || strings.HasPrefix(line, "Hit:") {
			l.requests++
		}
	}
	if strings.Contains(out, "Hash Sum mismatch") || strings.Contains(out, "File has unexpected size") {
		l.mismatches++
	}
	if len(problems) > 0 {
		l.errors++
		if len(l.problems) < 20 {
			l.problems = append(l.problems, client+" "+what+": "+strings.Join(problems, "; "))
		}
	}
}

// waitUpdates waits until n more updates than now have finished.
func (l *aptLoop) waitUpdates(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	l.mu.Lock()
	want := l.updates + n
	l.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		got := l.updates
		l.mu.Unlock()
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("apt clients finished %d updates in %v; want %d more: %s", got-want+n, timeout, n, l.report())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finish stops the clients and waits for them; it may be called again.
func (l *aptLoop) finish() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// report says what the clients saw.
func (l *aptLoop) report() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d apt-get update and %d apt-get download (%d requests), %d errors, %d hash-sum mismatches",
		l.updates, l.downloads, l.requests, l.errors, l.mismatches)
	for _, p := range l.problems {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	return b.String()
}
