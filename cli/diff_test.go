package cli

// Tests of armor diff by release id, against a controld in process and a local
// directory store. Diffs of manifest files are in TestDiff (cli_test.go).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/armor-apt/armor/manifest"
)

// TestDiffReleases: armor diff takes releases recorded in controld by id or prefix, alone
// (against the working manifest), beside a manifest file, or the active release with
// --active, so a draft is reviewed before it is activated; an unknown id is named.
func TestDiffReleases(t *testing.T) {
	t.Parallel()
	site := newControldSite(t)
	p := site.project(t)
	armorOK(t, "-c", p.cfg, "repos", "create")
	armorOK(t, "-c", p.cfg, "push")
	r1 := loadManifest(t, p.manifestPath()).ID
	file1 := filepath.Join(t.TempDir(), "first.toml")
	if err := os.WriteFile(file1, readFileT(t, p.manifestPath()), 0o644); err != nil {
		t.Fatal(err)
	}
	p.add(t, "newpkg")
	armorOK(t, "-c", p.cfg, "push", "--no-activate")
	r2 := loadManifest(t, p.manifestPath()).ID

	added, removed := regexp.MustCompile(`(?m)^\+ newpkg\s+1\.0-1\s`), regexp.MustCompile(`(?m)^- newpkg\s+1\.0-1\s`)
	cases := []struct {
		args []string
		want *regexp.Regexp
	}{
		{[]string{"--active"}, added},
		{[]string{r1[:8]}, added},
		{[]string{r1[:4]}, added},
		{[]string{r1}, added},
		{[]string{r1[:12], r2[:8]}, added},
		{[]string{r2[:10], r1}, removed},
		{[]string{file1, r2[:9]}, added},
		{[]string{"--active", r2[:8]}, added},
		{[]string{"--active", file1}, nil},
		{[]string{r2[:8]}, nil},
	}
	for _, c := range cases {
		out := armorOK(t, append([]string{"-c", p.cfg, "diff"}, c.args...)...)
		if c.want == nil {
			if !strings.Contains(out, "no package changes") {
				t.Errorf("diff %v: want no changes, got\n%s", c.args, out)
			}
			continue
		}
		if !c.want.MatchString(out) || strings.Count(out, "\n") != 1 {
			t.Errorf("diff %v: want %s alone, got\n%s", c.args, c.want, out)
		}
	}
	out := armorOK(t, "--json", "-c", p.cfg, "diff", "--active")
	var changes []manifest.Change
	if err := json.Unmarshal([]byte(out), &changes); err != nil || len(changes) != 1 || changes[0].Name != "newpkg" || changes[0].Kind != manifest.Added {
		t.Errorf("diff --json --active: %v %+v", err, changes)
	}

	armorFails(t, 1, []string{"release deadbeef00", "no recorded release whose id starts with it", site.url}, "-c", p.cfg, "diff", "deadbeef00")
	armorFails(t, 1, []string{"release deadbeef00"}, "-c", p.cfg, "diff", r1[:8], "deadbeef00")
	armorFails(t, 1, []string{"nothere.toml: no such manifest file, nor a release id"}, "-c", p.cfg, "diff", "nothere.toml")
	armorFails(t, 2, []string{"--active"}, "-c", p.cfg, "diff", "--active", r1[:8], r2[:8])

	// Without controld, an id is refused naming what is missing.
	q := newPushProject(t, site.remote)
	armorFails(t, 1, []string{"no controld configured", "release " + r1[:8]}, "-c", q.cfg, "diff", r1[:8])
}
