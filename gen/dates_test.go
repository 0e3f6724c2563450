package gen_test

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/gen"
	"github.com/armor-apt/armor/manifest"
)

// TestBuildValidUntilPassed: a build whose Valid-Until (its date plus valid_for) has
// already passed fails, naming the suite and the dates.
func TestBuildValidUntilPassed(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Suites[0].ValidFor = 24 * time.Hour
	r.Opts.Now = func() time.Time { return testDate.Add(25 * time.Hour) }
	_, err := r.build()
	want := "suite stable would be valid until Mon, 02 Mar 2026 12:00:00 UTC (the build date Sun, 01 Mar 2026 12:00:00 UTC plus valid_for 24h0m0s), which has passed"
	if !errors.Is(err, gen.ErrDate) || !strings.Contains(err.Error(), want) {
		t.Fatalf("build: %v\nwant ErrDate containing %q", err, want)
	}
	if _, err := os.Stat(r.tree("dists")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused build wrote a tree: %v", err)
	}
}

// TestExpiredReleaseSignedAgain: a Release kept from the parent (nothing changed) whose
// Valid-Until has passed is signed afresh with the build's date, so the build never
// leaves an expired suite for controld or apt to refuse.
func TestExpiredReleaseSignedAgain(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Suites[0].ValidFor = 7 * 24 * time.Hour
	r.mustBuild()
	later := testDate.Add(8 * 24 * time.Hour)
	r.Opts.Date = later.Add(-24 * time.Hour) // the parent's Valid-Until, which the clock has passed
	r.Opts.Now = func() time.Time { return later }
	res := r.mustBuild()
	if res.UpToDate || res.Stats.SuitesSigned != 1 || res.Stats.IndexesWritten != 0 {
		t.Fatalf("up to date %v, stats %+v; want the suite signed again and no index written", res.UpToDate, res.Stats)
	}
	rel, err := os.ReadFile(r.tree("dists/stable/Release"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(rel, []byte("\nValid-Until: Sun, 15 Mar 2026 12:00:00 UTC\n")) {
		t.Errorf("Release:\n%s\nwant Valid-Until a week after the new date", rel)
	}
	// Within its Valid-Until, a kept Release stays as it was.
	r.Opts.Date = later
	if res := r.mustBuild(); !res.UpToDate {
		t.Errorf("a build within Valid-Until signed again: %+v", res.Stats)
	}
}

// TestBuildDateAfterParent: a build asked for a date not after its parent's (two builds
// within one second, or a chain of builds at one SOURCE_DATE_EPOCH) is dated a second
// after the parent, so that apt can tell the two apart and controld takes it as newer,
// and its manifest records the date asked for; a build asked for a later date takes it.
func TestBuildDateAfterParent(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.DateSource = gen.DateFromEnv
	steps := []struct {
		name            string
		asked           time.Time
		date, requested time.Time // requested zero: no requested_date
	}{
		{"first", testDate, testDate, time.Time{}},
		{"same date as the parent", testDate, testDate.Add(time.Second), testDate},
		{"same date again, as the parent asked", testDate, testDate.Add(2 * time.Second), testDate},
		{"after the date the parent asked, not after its date", testDate.Add(time.Second), testDate.Add(3 * time.Second), testDate.Add(time.Second)},
		{"after the parent's date", testDate.Add(time.Hour), testDate.Add(time.Hour), time.Time{}},
	}
	for i, st := range steps {
		writeOne(t, r.in("extra"), fmt.Sprintf("extra%d", i), "1.0", "amd64", "")
		r.Opts.Date = st.asked
		res := r.mustBuild()
		checkBuildDate(t, st.name, r, res.Manifest, st.date, st.requested)
	}
}

// TestBuildChainAtOneEpoch: a CI pipeline that keeps SOURCE_DATE_EPOCH at its commit's
// time through several builds (a retention job, a copy, a publish) builds each, dated a
// second after the one before.
func TestBuildChainAtOneEpoch(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Date, r.Opts.DateSource = testDate, gen.DateFromEnv
	r.mustBuild()
	for i := 1; i <= 3; i++ {
		writeOne(t, r.in("extra"), fmt.Sprintf("extra%d", i), "1.0", "amd64", "")
		res := r.mustBuild()
		checkBuildDate(t, fmt.Sprintf("build %d", i), r, res.Manifest, testDate.Add(time.Duration(i)*time.Second), testDate)
	}
}

// checkBuildDate checks a build's manifest date and requested_date, and its Release's
// Date.
func checkBuildDate(t *testing.T, name string, r *repo, m *manifest.Manifest, date, requested time.Time) {
	t.Helper()
	wantRequested := ""
	if !requested.IsZero() {
		wantRequested = requested.Format(time.RFC3339)
	}
	if m.Date != date.Format(time.RFC3339) || m.RequestedDate != wantRequested {
		t.Errorf("%s: date %s, requested_date %q; want %s, %q", name, m.Date, m.RequestedDate, date.Format(time.RFC3339), wantRequested)
	}
	rel, err := os.ReadFile(r.tree("dists/stable/Release"))
	if err != nil {
		t.Fatal(err)
	}
	if d := "\nDate: " + date.Format("Mon, 02 Jan 2006 15:04:05") + " UTC\n"; !bytes.Contains(rel, []byte(d)) {
		t.Errorf("%s: Release lacks %q:\n%s", name, d, rel)
	}
}

// TestBuildDateOlderThanParent: a build asked for a date older than the one its parent's
// build asked for fails before it writes anything, naming both dates, where its date
// came from and what to do: a runner whose clock is behind, a SOURCE_DATE_EPOCH from an
// older checkout, an old date in armor.toml.
func TestBuildDateOlderThanParent(t *testing.T) {
	tests := []struct {
		name   string
		source gen.DateSource
		bumped bool // the parent was dated a second after the date it asked for
		asked  time.Time
		want   []string
	}{
		{"runner's clock behind", gen.DateFromClock, false, testDate.Add(-time.Hour), []string{
			"this build's date 2026-03-01T11:00:00Z (from this runner's clock) is older than the date of its parent release",
			", 2026-03-01T12:00:00Z: ", "this runner's clock is behind", "set SOURCE_DATE_EPOCH to a time after the parent's date, such as 1772366401"}},
		{"SOURCE_DATE_EPOCH of an older checkout", gen.DateFromEnv, false, testDate.Add(-time.Second), []string{
			"this build's date 2026-03-01T11:59:59Z (from SOURCE_DATE_EPOCH=1772366399)", ", 2026-03-01T12:00:00Z: ",
			"build from the checkout the parent was built from, or a newer one", "such as 1772366401"}},
		{"SOURCE_DATE_EPOCH before the date a bumped parent asked for", gen.DateFromEnv, true, testDate.Add(-time.Second), []string{
			"(from SOURCE_DATE_EPOCH=1772366399)", ", 2026-03-01T12:00:01Z (its build asked for 2026-03-01T12:00:00Z and was dated a second after its own parent): ",
			"such as 1772366402"}},
		{"armor.toml's date", gen.DateFromConfig, false, testDate.Add(-24 * time.Hour), []string{
			"this build's date 2026-02-28T12:00:00Z (from armor.toml's date)", "set date in armor.toml to a time after the parent's date, such as 1772366401"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Synth: 2})
			r.mustBuild()
			if tt.bumped {
				writeOne(t, r.in("extra"), "bump", "1.0", "amd64", "")
				if m := r.mustBuild().Manifest; m.RequestedDate == "" {
					t.Fatalf("the parent was not dated after its own parent: %s", m.Date)
				}
			}
			parent, before := r.Last, snapshot(t, r.Opts.TreeDir)
			writeOne(t, r.in("extra"), "older", "1.0", "amd64", "")
			r.Opts.Date, r.Opts.DateSource = tt.asked, tt.source
			_, err := r.build()
			if !errors.Is(err, gen.ErrDate) {
				t.Fatalf("build: %v, want ErrDate", err)
			}
			for _, w := range append(tt.want, "parent release "+parent.ID[:12]) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if after := snapshot(t, r.Opts.TreeDir); !maps.Equal(before, after) {
				t.Errorf("the refused build changed the tree: %v", diffSnapshots(before, after))
			}
			if r.Last != parent {
				t.Errorf("the refused build returned a release")
			}
		})
	}
}

// TestBuildWithinOneSecondVerifiesAtOnce: a build made in the same second as its parent,
// by the clock, is dated a second later; it returns only once that second has come, so
// its InRelease verifies as soon as the build returns, as controld verifies it on a
// push that follows at once (a signature made in the future fails go-crypto's check).
func TestBuildWithinOneSecondVerifiesAtOnce(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Now = nil
	r.Opts.Date = time.Now().UTC().Truncate(time.Second) // a parent dated this second
	r.mustBuild()
	writeOne(t, r.in("extra"), "extra", "1.0", "amd64", "")
	res := r.mustBuild() // the same second again: moved a second later, ahead of the clock
	if res.Manifest.Date == r.Opts.Date.Format(time.RFC3339) {
		t.Fatalf("the second build kept its parent's date %s", res.Manifest.Date)
	}
	data, err := os.ReadFile(r.tree("dists/stable/InRelease"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sign.VerifyClearsigned(data, publicKeyring(t, r.Opts.Key)); err != nil {
		t.Fatalf("the InRelease of a build moved a second after its parent does not verify when the build returns: %v", err)
	}
}
