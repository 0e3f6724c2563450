package cli_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armor-apt/armor/cli/config"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
)

// TestBuildSymlinkLoop: a symbolic link loop among the inputs (a link to the directory
// itself and one to ".") does not keep armor build walking for ever: it publishes each
// package once.
func TestBuildSymlinkLoop(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	armor(t, filepath.Dir(dir), nil, "init", "--dir", dir, "--name", "loop", "--hostname", "apt.loop.test", "--key-algo", "eddsa")
	loop := filepath.Join(dir, "debs", "loop")
	if err := os.MkdirAll(loop, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(loop, "looped", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../loop", filepath.Join(loop, "self")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(loop, "dot")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, armorBin, "build")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("armor build over a link loop: %v (a timeout means it walked the loop)\n%s", err, out)
	}
	m, err := manifest.Load(filepath.Join(dir, "manifest.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Packages) != 1 || m.Packages[0].Name != "looped" {
		t.Errorf("the release lists %+v, want looped once", m.Packages)
	}
}

// TestBuildSIGTERM: SIGTERM, which is how CI cancels a job, stops armor build promptly
// with a non-zero status and a message saying so, and leaves no tree or manifest behind.
func TestBuildSIGTERM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	armor(t, filepath.Dir(dir), nil, "init", "--dir", dir, "--name", "term", "--hostname", "apt.term.test", "--key-algo", "eddsa")
	if _, err := synth.Write(filepath.Join(dir, "debs"), synth.Options{N: 2000, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(armorBin, "build")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// SIGTERM is sent once the build holds its cache lock, which it takes after armor has
	// set up its signal handling: a fixed sleep raced the start of the process on a
	// loaded machine, whose SIGTERM then killed it before armor could say anything.
	lock := filepath.Join(dir, config.DefaultCache, "lock")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(lock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("armor build did not take its lock %s within 60s\n%s", lock, stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("armor build did not stop within 15s of SIGTERM")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() <= 0 || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("armor build after SIGTERM: %v, want a non-zero exit saying it was interrupted\n%s", err, stderr.String())
	}
	for _, p := range []string{"manifest.toml", "public/dists"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("the interrupted build left %s", p)
		}
	}
}
