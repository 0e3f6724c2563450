package gen_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/gen"
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

// TestBuildSameSecondAsParent: a build dated as its parent (two builds within one
// second, or a SOURCE_DATE_EPOCH a chain keeps), or before it (a clock that is behind,
// an old SOURCE_DATE_EPOCH), is dated a second after the parent, so that apt can tell
// the two apart and controld takes it as newer.
func TestBuildSameSecondAsParent(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.mustBuild()
	for i, date := range []time.Time{testDate, testDate, testDate.Add(-time.Hour)} {
		writeOne(t, r.in("extra"), fmt.Sprintf("extra%d", i), "1.0", "amd64", "")
		r.Opts.Date = date
		res := r.mustBuild()
		want := testDate.Add(time.Duration(i+1) * time.Second)
		if res.Manifest.Date != want.Format(time.RFC3339) {
			t.Errorf("build %d: manifest date %s, want %s", i, res.Manifest.Date, want.Format(time.RFC3339))
		}
		rel, err := os.ReadFile(r.tree("dists/stable/Release"))
		if err != nil {
			t.Fatal(err)
		}
		if d := "\nDate: " + want.Format("Mon, 02 Jan 2006 15:04:05") + " UTC\n"; !bytes.Contains(rel, []byte(d)) {
			t.Errorf("build %d: Release lacks %q:\n%s", i, d, rel)
		}
	}
}

// TestBuildWithinOneSecondVerifiesAtOnce: a build made in the same second as its parent,
// by the clock, is dated a second later; it returns only once that second has come, so
// its InRelease verifies as soon as the build returns, as controld verifies it on a
// push that follows at once (a signature made in the future fails go-crypto's check).
func TestBuildWithinOneSecondVerifiesAtOnce(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Now = nil
	r.Opts.Date = time.Now().UTC().Truncate(time.Second).Add(time.Second) // a parent dated "now", at worst a second ahead
	r.mustBuild()
	writeOne(t, r.in("extra"), "extra", "1.0", "amd64", "")
	res := r.mustBuild() // same Date from the clock: moved a second later
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
