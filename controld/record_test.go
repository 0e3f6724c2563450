package controld_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/debian/sign"
	"github.com/armor-apt/armor/manifest"
)

func TestRecordRefused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	f.repo("other")
	id1, sum1 := f.release("demo", "", "1.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum1, true, ""); err != nil {
		t.Fatal(err)
	}
	// Each case builds release 2.0 of demo, spoils it, and returns the manifest digest.
	next := func() *tree { return newTree(t, "demo", id1, "2.0", f.key) }
	packages := "dists/stable/main/binary-amd64/Packages"
	tests := []struct {
		name   string
		make   func() string
		status int
		want   string
	}{
		{"tampered manifest", func() string {
			tr := next()
			tr.publish(t, f.store)
			data, _ := manifest.Marshal(tr.m)
			i := bytes.Index(data, []byte("2.0"))
			if i < 0 {
				t.Fatalf("no 2.0 in the manifest:\n%s", data)
			}
			data[i+2] = '1' // one byte edited: version 2.1
			return put(t, f.store, data)
		}, 422, "id does not match"},
		{"manifest is not a manifest", func() string { return put(t, f.store, []byte("schema = 1\nbogus = 2\n")) }, 422, "bogus"},
		{"manifest not in the store", func() string { return strings.Repeat("ab", 32) }, 422, "not in the store"},
		{"InRelease signed by another key", func() string {
			tr := next()
			tr.sign(t, f.other)
			return tr.publish(t, f.store)
		}, 422, "not registered for repository demo"},
		{"InRelease not signed", func() string {
			tr := next()
			tr.set("dists/stable/InRelease", tr.files["dists/stable/Release"])
			return tr.publish(t, f.store)
		}, 422, "dists/stable/InRelease"},
		{"Release.gpg by another key", func() string {
			tr := next()
			sig, err := f.other.DetachSign(tr.files["dists/stable/Release"], 0)
			if err != nil {
				t.Fatal(err)
			}
			tr.set("dists/stable/Release.gpg", sig)
			return tr.publish(t, f.store)
		}, 422, "Release.gpg"},
		{"object missing from the store", func() string {
			tr := next()
			sum := tr.publish(t, f.store)
			if err := f.store.Delete(ctx, tr.m.Packages[0].SHA256); err != nil {
				t.Fatal(err)
			}
			return sum
		}, 422, "missing from the store memory: " + "%s (pool/main/h/hello/hello_2.0_amd64.deb)"},
		{"Packages differs from what Release lists", func() string {
			tr := next()
			tr.set(packages, append(tr.files[packages], "Extra: field\n"...))
			return tr.publish(t, f.store)
		}, 422, "Release lists sha256"},
		{"Release has a malformed line", func() string {
			tr := next()
			tr.set("dists/stable/Release", append(tr.files["dists/stable/Release"], "garbage\n"...))
			tr.sign(t, f.key)
			return tr.publish(t, f.store)
		}, 422, `dists/stable/InRelease: release line 10: "garbage" is neither a field`},
		{"Release field names are case-insensitive", func() string {
			tr := next()
			tr.set(packages, append(tr.files[packages], "Extra: field\n"...))
			tr.set("dists/stable/Release", bytes.Replace(tr.files["dists/stable/Release"], []byte("SHA256:"), []byte("sha256:"), 1))
			tr.sign(t, f.key)
			return tr.publish(t, f.store)
		}, 422, "Release lists sha256"},
		{"Valid-Until has passed", func() string {
			tr := next()
			tr.validUntil(t, f.key, "Sun, 22 Nov 2026 07:59:59 UTC") // the clock says 08:00:00
			return tr.publish(t, f.store)
		}, 422, "suite stable: Release is valid until Sun, 22 Nov 2026 07:59:59 UTC, which has passed (controld's clock says Sun, 22 Nov 2026 08:00:00 UTC): rebuild with armor build --resign"},
		{"Valid-Until is not a date", func() string {
			tr := next()
			tr.validUntil(t, f.key, "next week")
			return tr.publish(t, f.store)
		}, 422, `dists/stable/InRelease: release Valid-Until "next week"`},
		{"Release is not the signed text", func() string {
			tr := next()
			tr.set("dists/stable/Release", append(tr.files["dists/stable/Release"], "X: y\n"...))
			return tr.publish(t, f.store)
		}, 422, "not the text signed"},
		{"by-hash name does not match content", func() string {
			tr := next()
			for _, file := range tr.m.Files {
				if strings.Contains(file.Path, "/by-hash/") {
					tr.set(file.Path, []byte("something else\n"))
				}
			}
			return tr.publish(t, f.store)
		}, 422, "by-hash"},
		{"no InRelease", func() string {
			tr := next()
			tr.m.Files = slices.DeleteFunc(tr.m.Files, func(x manifest.File) bool { return strings.HasSuffix(x.Path, "InRelease") })
			return tr.publish(t, f.store)
		}, 422, "no dists/<suite>/InRelease"},
		{"manifest of another repository", func() string {
			return newTree(t, "other", "", "2.0", f.key).publish(t, f.store)
		}, 422, `is for repository "other"`},
		{"unknown parent", func() string {
			return newTree(t, "demo", strings.Repeat("cd", 32), "2.0", f.key).publish(t, f.store)
		}, 422, "parent release"},
		{"no parent but releases exist", func() string {
			return newTree(t, "demo", "", "2.0", f.key).publish(t, f.store)
		}, 422, "no parent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sum := tc.make()
			want := tc.want
			//lint:ignore S1017 next() creates a release: call it only when the message needs one
			if strings.Contains(want, "%s") {
				want = strings.Replace(want, "%s", next().m.Packages[0].SHA256, 1)
			}
			before := f.snapshot()
			for _, activate := range []bool{false, true} {
				expect := ""
				if activate {
					expect = id1
				}
				_, err := f.admin.RecordRelease(ctx, "demo", sum, activate, expect)
				apiErr := wantStatus(t, err, tc.status)
				if apiErr.Code != "invalid_release" || !strings.Contains(apiErr.Message, want) {
					t.Errorf("error %s: %q, want invalid_release containing %q", apiErr.Code, apiErr.Message, want)
				}
			}
			if after := f.snapshot(); after != before {
				t.Errorf("state changed:\n%s\n→\n%s", before, after)
			}
		})
	}

	// After all that, the good release still records and activates.
	tr := next()
	sum := tr.publish(t, f.store)
	rec, err := f.admin.RecordRelease(ctx, "demo", sum, true, id1)
	if err != nil || rec.Activation == nil || rec.Activation.To != tr.m.ID {
		t.Fatalf("good release: %+v, %v", rec, err)
	}
}

func TestRecordActivateConflictRecordsNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	id1, sum1 := f.release("demo", "", "1.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum1, true, ""); err != nil {
		t.Fatal(err)
	}
	id2, sum2 := f.release("demo", id1, "2.0")
	_, err := f.admin.RecordRelease(ctx, "demo", sum2, true, "")
	if apiErr := wantStatus(t, err, http.StatusConflict); apiErr.Active != id1 {
		t.Errorf("conflict names %q, want %s", apiErr.Active, id1)
	}
	if _, err := f.admin.Release(ctx, "demo", id2); err == nil {
		t.Error("the release was recorded although its activation lost")
	}
}

// validUntil gives the tree's Release a Valid-Until field and signs it again.
func (tr *tree) validUntil(t testing.TB, key *sign.Key, date string) {
	t.Helper()
	rel := "dists/stable/Release"
	tr.set(rel, bytes.Replace(tr.files[rel], []byte("Acquire-By-Hash:"), []byte("Valid-Until: "+date+"\nAcquire-By-Hash:"), 1))
	tr.sign(t, key)
}

// TestRecordValidUntil checks Valid-Until by controld's clock: a release that is still
// valid records and activates; once the clock passes its Valid-Until, the same release
// (or one built on it) is refused, with or without activation, and nothing changes.
func TestRecordValidUntil(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	until := "Sun, 22 Nov 2026 09:00:00 UTC" // an hour after the fixture's clock
	tr1 := newTree(t, "demo", "", "1.0", f.key)
	tr1.validUntil(t, f.key, until)
	if _, err := f.admin.RecordRelease(ctx, "demo", tr1.publish(t, f.store), true, ""); err != nil {
		t.Fatalf("a release valid for another hour: %v", err)
	}
	tr2 := newTree(t, "demo", tr1.m.ID, "2.0", f.key)
	tr2.validUntil(t, f.key, until)
	sum2 := tr2.publish(t, f.store)
	f.clock.Add(time.Hour + time.Second)
	before := f.snapshot()
	for _, activate := range []bool{false, true} {
		_, err := f.admin.RecordRelease(ctx, "demo", sum2, activate, "")
		apiErr := wantStatus(t, err, http.StatusUnprocessableEntity)
		want := "suite stable: Release is valid until " + until + ", which has passed"
		if apiErr.Code != "invalid_release" || !strings.Contains(apiErr.Message, want) || !strings.Contains(apiErr.Message, "armor build --resign") {
			t.Errorf("activate=%v: error %s: %q, want invalid_release containing %q and armor build --resign", activate, apiErr.Code, apiErr.Message, want)
		}
	}
	if after := f.snapshot(); after != before {
		t.Errorf("state changed:\n%s\n→\n%s", before, after)
	}
}
