package cli_test

// The end-to-end test does what the README says, with the real armor binary as a user
// runs it: init, build, a controld and an edged as separate processes, push, then real
// apt-get through the edge (update, install by apt-get download + dpkg -x into a throwaway
// root, since the test cannot install into the machine's own root), an upgrade, a
// rollback, and the manifests' history read with git diff.

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

var armorBin string

func TestMain(m *testing.M) {
	code := func() int {
		armorBin = os.Getenv("ARMOR_BIN")
		if armorBin == "" {
			dir, err := os.MkdirTemp("", "armor-e2e-bin")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			armorBin = filepath.Join(dir, "armor")
			cmd := exec.Command("go", "build", "-o", armorBin, "./armor")
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "build armor:", err)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// armor runs the binary in dir and returns its standard output; it fails the test on a
// non-zero exit, showing everything the command printed.
func armor(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(armorBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("armor %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// freeAddr asks the kernel for a free port on 127.0.0.1 for a daemon started as a
// separate process. The port is free only until another socket takes it: where the test
// can start the daemon before it needs the address, startControld and startEdge let the
// daemon bind a port the kernel picks and read it from its log instead.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// daemon starts an armor daemon and stops it (SIGTERM) when the test ends.
func daemon(t *testing.T, env []string, logPath string, args ...string) *exec.Cmd {
	t.Helper()
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(armorBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
		log.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", filepath.Base(logPath), data)
		}
	})
	return cmd
}

// startControld starts controld with args on a port the kernel picks (--listen
// 127.0.0.1:0), waits until it answers, and returns its URL. It is stopped when the test
// ends.
func startControld(t *testing.T, env []string, logPath string, args ...string) string {
	t.Helper()
	_, fields := startAnnounced(t, env, logPath, "controld listening", append(args, "--listen", "127.0.0.1:0")...)
	url := "http://" + fields["addr"]
	waitHTTP(t, url+"/v1/healthz")
	return url
}

// startEdge starts edged with args on ports the kernel picks, waits until its admin
// listener answers, and returns the addresses of its listener and its admin listener.
func startEdge(t *testing.T, env []string, logPath string, args ...string) (listen, admin string) {
	t.Helper()
	_, fields := startAnnounced(t, env, logPath, "edged listening",
		append(args, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")...)
	waitHTTP(t, "http://"+fields["admin"]+"/healthz")
	return fields["listen"], fields["admin"]
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within 20s", url)
}

// waitServed waits until the edge serves the InRelease of release id's tree: the
// InRelease bytes from the local tree.
func waitServed(t *testing.T, edge, host, tree string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(tree, "dists", "stable", "InRelease"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var got []byte
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", "http://"+edge+"/dists/stable/InRelease", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			got = readAll(resp)
			if resp.StatusCode == 200 && bytes.Equal(got, want) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("edge did not serve the new InRelease within 10s; last body:\n%s", got)
}

func readAll(resp *http.Response) []byte {
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.Bytes()
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=armor test", "-c", "user.email=test@armor.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestEndToEnd(t *testing.T) {
	work := t.TempDir()
	project := filepath.Join(work, "project")
	cas := filepath.Join(work, "store")
	const host = "apt.e2e.test"

	// 1. controld, with tokens made offline in its data directory; then init, packages,
	// build.
	data := filepath.Join(work, "controld")
	admin := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate", "--action", "read"))
	edgeToken := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "edge", "--for", "*", "--action", "read"))
	controldURL := startControld(t, nil, filepath.Join(work, "controld.log"), "controld", "--data-dir", data, "--store", cas)
	armor(t, work, nil, "init", "--dir", project, "--name", "e2e", "--hostname", host,
		"--key-algo", "rsa3072", "--store", cas, "--controld", controldURL)
	// The newest version of each package only, as Debian's archive keeps (init writes
	// the line commented out).
	cfgPath := filepath.Join(project, "armor.toml")
	cfgData, err := os.ReadFile(cfgPath)
	if err != nil || !strings.Contains(string(cfgData), "# keep_versions = 3") {
		t.Fatalf("armor init's armor.toml lacks the keep_versions line: %v", err)
	}
	cfgData = []byte(strings.Replace(string(cfgData), "# keep_versions = 3", "keep_versions = 1", 1))
	if err := os.WriteFile(cfgPath, cfgData, 0o644); err != nil {
		t.Fatal(err)
	}
	debs := filepath.Join(project, "debs")
	real, err := filepath.Glob("../testdata/debs/*.deb")
	if err != nil || len(real) == 0 {
		t.Fatalf("no fixture debs: %v", err)
	}
	for _, p := range real {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(debs, filepath.Base(p)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, err := synth.WriteOne(debs, "hello-e2e", "1.0-1", "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	git(t, project, "init", "-q")
	out := armor(t, project, nil, "build")
	if !strings.Contains(out, "built release") {
		t.Fatalf("build output: %s", out)
	}

	// 2. edged.
	edgeAddr, _ := startEdge(t, []string{"ARMOR_EDGE_TOKEN=" + edgeToken}, filepath.Join(work, "edged.log"), "edged",
		"--controld", controldURL, "--store", cas, "--state-dir", filepath.Join(work, "edged"))

	// 3. push: record and flip.
	env := []string{"ARMOR_TOKEN=" + admin}
	armor(t, project, env, "repos", "create")
	out = armor(t, project, env, "push")
	if !strings.Contains(out, "recorded and activated") {
		t.Fatalf("push output: %s", out)
	}
	tree := filepath.Join(project, "public")
	waitServed(t, edgeAddr, host, tree)
	// The served tree verifies the way apt checks it, through the edge as a proxy.
	out = armor(t, project, []string{"HTTP_PROXY=http://" + edgeAddr}, "verify", "http://"+host+"/",
		"--suite", "stable", "--pool", "--keyring", filepath.Join(project, "keys", "e2e-archive-keyring.gpg"))
	if !strings.Contains(out, "ok: 1 suite(s)") || !strings.Contains(out, "5 pool file(s)") {
		t.Fatalf("verify through the edge: %s", out)
	}
	git(t, project, "add", "armor.toml", "manifest.toml", "keys")
	git(t, project, "commit", "-q", "-m", "first release")

	// 4. apt through the edge: update, then install into a throwaway root.
	apt := apttest.New(t, apttest.Options{
		Sources: []apttest.Source{{URI: "http://" + host + "/", Suites: []string{"stable"}, Components: []string{"main"},
			SignedBy: filepath.Join(project, "keys", "e2e-archive-keyring.gpg")}},
		Proxy: "http://" + edgeAddr,
	})
	apt.Update(t)
	if v := apt.Policy(t, "hello-e2e"); v != "1.0-1" {
		t.Fatalf("apt candidate for hello-e2e = %q, want 1.0-1", v)
	}
	root := filepath.Join(work, "root")
	apt.Install(t, root, "hello-e2e", "natpmp-utils")
	if _, err := os.Stat(filepath.Join(root, "usr", "share", "doc", "hello-e2e")); err != nil {
		entries, _ := filepath.Glob(filepath.Join(root, "*", "*"))
		t.Fatalf("hello-e2e not installed into the throwaway root: %v (root has %v)", err, entries)
	}

	// 5. a new version: build, push; apt sees the upgrade.
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WriteOne(debs, "hello-e2e", "1.1-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	armor(t, project, nil, "build")
	diff := armor(t, project, nil, "diff")
	if !strings.Contains(diff, "hello-e2e") || !strings.Contains(diff, "1.0-1 -> 1.1-1") || !strings.Contains(diff, "upgraded") {
		t.Fatalf("armor diff does not show the upgrade:\n%s", diff)
	}
	// Pushed as a draft first: recorded, not served, until activated by an id prefix.
	out = armor(t, project, env, "push", "--no-activate")
	m := regexp.MustCompile("armor activate ([0-9a-f]{64})").FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("push --no-activate did not say how to activate:\n%s", out)
	}
	if st := armor(t, project, env, "status"); strings.Contains(st, m[1]) {
		t.Fatalf("a draft is active:\n%s", st)
	}
	armor(t, project, env, "activate", m[1][:12])
	waitServed(t, edgeAddr, host, tree)
	apt.Update(t)
	if v := apt.Policy(t, "hello-e2e"); v != "1.1-1" {
		t.Fatalf("after the upgrade, apt candidate = %q, want 1.1-1", v)
	}

	// The manifests read sensibly in git diff: the hello-e2e table changes version, path
	// and digest, and nothing about the other packages changes.
	gd := git(t, project, "diff", "--", "manifest.toml")
	for _, want := range []string{"-version = '1.0-1'", "+version = '1.1-1'", "+path = 'pool/main/h/hello-e2e/hello-e2e_1.1-1_amd64.deb'", "+parent = "} {
		if !strings.Contains(gd, want) {
			t.Errorf("git diff of manifest.toml lacks %q:\n%s", want, gd)
		}
	}
	if strings.Contains(gd, "natpmp") {
		t.Errorf("git diff of manifest.toml mentions unchanged packages:\n%s", gd)
	}
	git(t, project, "commit", "-q", "-am", "hello-e2e 1.1-1")

	// 6. rollback: apt sees the old version again.
	out = armor(t, project, env, "rollback")
	if !strings.Contains(out, "rolled back") {
		t.Fatalf("rollback output: %s", out)
	}
	git(t, project, "show", "HEAD~1:manifest.toml") // the old manifest is in git history
	deadline := time.Now().Add(10 * time.Second)
	for {
		upd := apt.Update(t)
		v := apt.Policy(t, "hello-e2e")
		if v == "1.0-1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after rollback, apt candidate = %q, want 1.0-1; apt-get update said:\n%s", v, upd)
		}
		time.Sleep(200 * time.Millisecond)
	}
	status := armor(t, project, env, "status")
	if !strings.Contains(status, "active:") {
		t.Fatalf("status: %s", status)
	}

	// 7. Operators: the release list marks the active release, and a token scoped to
	// read works until it is revoked.
	list := armor(t, project, env, "releases", "list")
	if n := strings.Count(list, "\n"); n < 4 || !strings.Contains(list, "*") {
		t.Fatalf("releases list (want a header, 3 releases, one marked active):\n%s", list)
	}
	secret := strings.TrimSpace(armor(t, project, env, "tokens", "create", "reader", "--for", "e2e", "--action", "read"))
	reader := []string{"ARMOR_TOKEN=" + secret}
	armor(t, project, reader, "status")
	if out := armor(t, project, env, "tokens", "list"); !strings.Contains(out, "reader") {
		t.Fatalf("tokens list lacks reader:\n%s", out)
	}
	armor(t, project, env, "tokens", "revoke", "reader")
	if out, err := armorErr(project, reader, "status"); err == nil || !strings.Contains(out, "401") {
		t.Fatalf("a revoked token still works (err %v):\n%s", err, out)
	}
	if out, err := armorErr(project, reader, "rollback"); err == nil {
		t.Fatalf("a read token may not roll back:\n%s", out)
	}
}

// armorErr runs the binary and returns its combined output and error, for commands that
// are expected to fail.
func armorErr(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command(armorBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
