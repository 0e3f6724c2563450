package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/manifest"
)

// recipeCommands returns the armor command lines of the publish job of a CI recipe
// under configs/ci, in order.
func recipeCommands(t *testing.T, name string) [][]string {
	t.Helper()
	path := filepath.Join("..", "configs", "ci", name)
	var job ciJob
	if strings.HasPrefix(name, "github") {
		job = githubJobs(t, path)["publish"]
	} else {
		job = gitlabJobs(t, path)["publish"]
	}
	var out [][]string
	for _, step := range job.steps {
		for _, line := range strings.Split(step, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "armor ") {
				out = append(out, strings.Fields(line)[1:])
			}
		}
	}
	return out
}

// TestCIRecipes runs the steps of configs/ci's GitHub Actions workflow and GitLab CI job
// as their runners would: a fresh checkout (armor.toml, manifest.toml, keys/ and the new
// .deb, nothing else), the key and token from the environment, a store on the S3 server.
// The release keeps every package the workstation published; then two pipelines from the
// same parent race, and both packages end up published. apt-get through the edge
// installs an old package and each new one.
func TestCIRecipes(t *testing.T) {
	gh, gl := recipeCommands(t, "github-actions.yml"), recipeCommands(t, "gitlab-ci.yml")
	if len(gh) == 0 || !slices.EqualFunc(gh, gl, slices.Equal) {
		t.Fatalf("the recipes run different armor commands: GitHub %q, GitLab %q", gh, gl)
	}
	srv := s3test.Start(t)
	c := newClusterWith(t, srv.Remote("armor", "ci"))
	ws := c.newProject(t, "ci", "apt.ci.test")
	debs := filepath.Join(ws.dir, "debs")
	for _, p := range []string{"ci-old-a", "ci-old-b", "ci-old-c"} {
		if _, err := synth.WriteOne(debs, p, "1.0-1", "amd64", ""); err != nil {
			t.Fatal(err)
		}
	}
	ws.build(t)
	ws.push(t, c)
	secret, err := os.ReadFile(filepath.Join(ws.dir, ".armor", "keys", "signing.sec.asc"))
	if err != nil {
		t.Fatal(err)
	}
	// The workstation's committed files, as a runner checks them out.
	checkout := func(t *testing.T, pkg string) string {
		dir := t.TempDir()
		for _, f := range []string{"armor.toml", "manifest.toml", "keys/ci-archive-keyring.gpg", "keys/ci-archive-keyring.asc"} {
			data, err := os.ReadFile(filepath.Join(ws.dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Mkdir(filepath.Join(dir, "debs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := synth.WriteOne(filepath.Join(dir, "debs"), pkg, "1.0-1", "amd64", ""); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	env := append(c.env(), "ARMOR_SIGNING_KEY="+string(secret))
	run := func(t *testing.T, dir string, steps [][]string) string {
		var out strings.Builder
		for _, args := range steps {
			o, err := armorErr(dir, env, args...)
			out.WriteString(o)
			if err != nil {
				t.Errorf("runner %s: armor %s: %v\n%s", filepath.Base(dir), strings.Join(args, " "), err, out.String())
				return out.String()
			}
		}
		return out.String()
	}

	// One pipeline: the runner publishes the workstation's packages and its own.
	one := checkout(t, "ci-new-one")
	out := run(t, one, gh)
	if !strings.Contains(out, "+ ci-new-one") || strings.Contains(out, "- ci-old") {
		t.Errorf("the runner's build does not say it adds ci-new-one and removes nothing:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(one, "public", "pool", "main", "c", "ci-old-a")); err == nil {
		t.Error("the runner's tree holds the old packages' pool files: it fetched them")
	}

	// Two pipelines built on the workstation's release, which is no longer active, race.
	two, three := checkout(t, "ci-new-two"), checkout(t, "ci-new-three")
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i, dir := range []string{two, three} {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = run(t, dir, gl) }()
	}
	wg.Wait()
	if !strings.Contains(outs[0]+outs[1], "applying its change again") {
		t.Errorf("neither racing pipeline rebased:\n%s\n%s", outs[0], outs[1])
	}

	var st struct {
		Active struct {
			Release string `json:"release"`
		} `json:"active"`
	}
	if err := json.Unmarshal([]byte(armor(t, ws.dir, c.env(), "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	var active *manifest.Manifest
	for _, dir := range []string{two, three} {
		m, err := manifest.Load(filepath.Join(dir, "manifest.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if m.ID == st.Active.Release {
			active = m
		}
	}
	if active == nil {
		t.Fatalf("the active release %s is neither racing runner's manifest", st.Active.Release)
	}
	var names []string
	for _, p := range active.Packages {
		names = append(names, p.Name)
	}
	want := []string{"ci-new-one", "ci-new-three", "ci-new-two", "ci-old-a", "ci-old-b", "ci-old-c"}
	if !slices.Equal(names, want) {
		t.Fatalf("the active release lists %v, want %v", names, want)
	}
	waitServedRelease(t, c, "apt.ci.test", active)

	apt := apttest.New(t, apttest.Options{
		Sources: []apttest.Source{{URI: "http://apt.ci.test/", Suites: []string{"stable"}, Components: []string{"main"}, SignedBy: ws.keyring()}},
		Proxy:   "http://" + c.edge,
	})
	apt.Update(t)
	root := filepath.Join(t.TempDir(), "root")
	apt.Install(t, root, "ci-old-b", "ci-new-one", "ci-new-two", "ci-new-three")
	for _, p := range []string{"ci-old-b", "ci-new-one", "ci-new-two", "ci-new-three"} {
		if _, err := os.Stat(filepath.Join(root, "usr", "share", "doc", p)); err != nil {
			t.Errorf("%s not installed: %v", p, err)
		}
	}
}

// waitServedRelease waits until the edge serves the release's InRelease under host.
func waitServedRelease(t *testing.T, c *cluster, host string, m *manifest.Manifest) {
	t.Helper()
	var want string
	for _, f := range m.Files {
		if f.Path == "dists/stable/InRelease" {
			want = f.SHA256
		}
	}
	for range 200 {
		resp, body, err := c.get(host, "/dists/stable/InRelease")
		if err == nil && resp.StatusCode == 200 && sha256Hex(body) == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the edge does not serve release %s's InRelease", m.ID)
}
