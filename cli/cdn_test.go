package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/cli"
	"github.com/armor-apt/armor/internal/testkit/acmetest"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/cdntest"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// TestCDN: Varnish, with configs/cdn/varnish.vcl as shipped, in front of two edges,
// caching by edged's Cache-Control, while apt clients loop through it: 50 releases are
// pushed and activated, and the clients see no error and no hash-sum mismatch. Each
// activation's webhook reaches armor cdn purger, which purges what changed: a stale
// InRelease that Varnish had just cached (for up to a minute, by its max-age) is
// replaced within seconds.
func TestCDN(t *testing.T) {
	const host, pkg, flips = "apt.cdn.test", "hello-cdn", 50
	work := t.TempDir()
	project := filepath.Join(work, "project")
	cas := filepath.Join(work, "store")
	data := filepath.Join(work, "controld")
	admin := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate"))
	edgeToken := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "edge", "--for", "*", "--action", "read"))
	ctlURL := startControld(t, nil, filepath.Join(work, "controld.log"), "controld", "--data-dir", data, "--store", cas)
	armor(t, work, nil, "init", "--dir", project, "--name", "cdn", "--hostname", host,
		"--key-algo", "eddsa", "--store", cas, "--controld", ctlURL)
	debs := filepath.Join(project, "debs")
	loop := newAptLoop()
	deb, err := synth.WriteOne(debs, pkg, "1.0-1", "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	loop.published(t, deb)
	git(t, project, "init", "-q")
	armor(t, project, nil, "build")
	env := []string{"ARMOR_TOKEN=" + admin}
	armor(t, project, env, "repos", "create")
	armor(t, project, env, "push")

	var edges, admins []string
	for i := range 2 {
		addr, adm := startEdge(t, []string{"ARMOR_EDGE_TOKEN=" + edgeToken}, filepath.Join(work, fmt.Sprintf("edge%d.log", i)),
			"edged", "--controld", ctlURL, "--store", cas, "--state-dir", filepath.Join(work, fmt.Sprintf("edge%d", i)))
		waitHTTP(t, "http://"+adm+"/readyz")
		edges, admins = append(edges, addr), append(admins, "http://"+adm)
	}
	cdn := cdntest.Start(t, "../configs/cdn/varnish.vcl", edges, host, "/dists/stable/InRelease")

	// The purger, fed by controld's activate webhook at an address that forwards to the
	// purger once it listens (the hook's secret must exist before it starts).
	purgerLB := acmetest.NewBalancer(t, "127.0.0.1:0")
	secret := armor(t, project, env, "hooks", "add", "http://"+purgerLB.Addr+"/", "--event", "activate", "--event", "rollback", "--event", "key")
	secretFile := filepath.Join(work, "purger.secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	purgerLog := filepath.Join(work, "purger.log")
	_, purger := startAnnounced(t, nil, purgerLog, "cdn purger listening", "cdn", "purger", "--listen", "127.0.0.1:0", "--purge-url", cdn.URL,
		"--edge", admins[0], "--edge", admins[1], "--secret-file", secretFile, "--log-format", "json")
	purgerLB.SetBackends(purger["addr"])

	t.Setenv("ARMOR_TOKEN", admin) // for armorIn
	for i := range 2 {
		loop.start(t, fmt.Sprint("client", i), apttest.Options{
			Sources: []apttest.Source{{URI: "http://" + host + "/", Suites: []string{"stable"}, Components: []string{"main"},
				SignedBy: filepath.Join(project, "keys", "cdn-archive-keyring.gpg")}},
			Proxy: cdn.URL,
		}, pkg)
	}
	defer loop.finish()

	inRelease := func() []byte {
		b, err := os.ReadFile(filepath.Join(project, "public", "dists", "stable", "InRelease"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var lags []time.Duration
	for i := 1; i <= flips; i++ {
		// Flips come faster than apt updates (the harder case: a flip in the middle of an
		// update); every fifth waits for an update that began after the one before.
		if i%5 == 0 {
			loop.waitUpdates(t, 2, 60*time.Second)
		}
		if err := os.Remove(deb); err != nil {
			t.Fatal(err)
		}
		if deb, err = synth.WriteOne(debs, pkg, fmt.Sprintf("1.%d-1", i), "amd64", ""); err != nil {
			t.Fatal(err)
		}
		loop.published(t, deb)
		old := inRelease()
		armorIn(t, project, "build")
		// Varnish holds the old InRelease, cached a moment ago: without a purge it would
		// serve it for the rest of its minute.
		// (Up to 10 s: on a loaded machine an edge may be slow to answer Varnish's fetch
		// or its probe.)
		cached, last := false, ""
		for deadline := time.Now().Add(10 * time.Second); !cached && time.Now().Before(deadline); {
			st, body, xc, age, err := cdn.Get(host, "/dists/stable/InRelease")
			if cached = err == nil && st == 200 && bytes.Equal(body, old) && xc == "HIT" && age <= 5; !cached {
				last = fmt.Sprintf("status %d, X-Cache %s, Age %d, the active InRelease %v, error %v", st, xc, age, bytes.Equal(body, old), err)
				time.Sleep(50 * time.Millisecond)
			}
		}
		if !cached {
			t.Fatalf("flip %d: Varnish did not hold the active InRelease freshly cached within 10s; last: %s", i, last)
		}
		armorIn(t, project, "push")
		want, pushed := inRelease(), time.Now()
		for {
			st, body, _, _, err := cdn.Get(host, "/dists/stable/InRelease")
			if err == nil && st == 200 && bytes.Equal(body, want) {
				lags = append(lags, time.Since(pushed))
				break
			}
			if time.Since(pushed) > 15*time.Second {
				t.Fatalf("flip %d: Varnish still serves the old InRelease 15s after the push (its max-age is 60s: no purge?)\n%s", i, loop.report())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	loop.finish()
	slowest := time.Duration(0)
	for _, l := range lags {
		slowest = max(slowest, l)
	}
	t.Logf("%d flips through Varnish: %s; the new InRelease served at most %v after a push", flips, loop.report(), slowest.Round(time.Millisecond))
	if loop.errors != 0 || loop.mismatches != 0 || loop.updates < flips/5 || loop.downloads == 0 {
		t.Fatalf("apt through Varnish: %s", loop.report())
	}
	purges, _ := os.ReadFile(purgerLog)
	if n := strings.Count(string(purges), `"msg":"purged"`); n < flips {
		t.Fatalf("the purger logged %d purges for %d activations:\n%s", n, flips, purges)
	}
	if log := armor(t, project, env, "hooks", "log", "--limit", "200"); strings.Contains(log, "failed") {
		t.Fatalf("webhook deliveries failed:\n%s", log)
	}
}

// armorIn runs an armor command on the project in this process (cli.Main), without the
// start of a binary: for the many pushes of the fleet tests.
func armorIn(t *testing.T, project string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := cli.Main(append([]string{"-c", filepath.Join(project, "armor.toml")}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("armor %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return stdout.String()
}
