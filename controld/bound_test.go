package controld_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armor-apt/armor/controld"
	"github.com/armor-apt/armor/manifest"
	"github.com/armor-apt/armor/store"
)

// TestRecordBoundsPackages acts as someone who holds a push token and can write to the
// store, but not the key: each case takes a release signed by the repository's key,
// changes its manifest (the id recomputed), uploads what it needs, and asks to record it.
// Every one is refused with 422, naming the suite, the index and the package, and nothing
// changes. The signed release itself records and activates afterwards.
func TestRecordBoundsPackages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	id1, sum1 := f.release("demo", "", "1.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum1, true, ""); err != nil {
		t.Fatal(err)
	}
	evil := []byte("#!/bin/sh\necho owned\n")
	put(t, f.store, evil)
	next := func() *tree { return newTree(t, "demo", id1, "2.0", f.key) }
	index := "suite stable, index main/binary-amd64/Packages: the manifest's packages are not those the signed index lists: "
	tests := []struct {
		name  string
		spoil func(tr *tree)
		want  []string
	}{
		{"package points at other bytes", func(tr *tree) {
			tr.m.Packages[0].SHA256, tr.m.Packages[0].Size = digest(evil), int64(len(evil))
		}, []string{index, "package hello 2.0 (amd64) in stable/main at pool/main/h/hello/hello_2.0_amd64.deb: the manifest has sha256 " + digest(evil) +
			fmt.Sprintf(" and size %d, the signed index (line 1) sha256 ", len(evil))}},
		{"package no index lists", func(tr *tree) {
			tr.add("evil", "1.0", evil)
		}, []string{index, "package evil 1.0 (amd64) in stable/main at pool/main/e/evil/evil_1.0_amd64.deb: the signed index does not list it"}},
		{"package of a suite no Release signs", func(tr *tree) {
			tr.add("evil", "1.0", evil)
			tr.m.Packages[0].Suite = "unstable"
		}, []string{"package evil 1.0 (amd64) in unstable/main", "the manifest has no signed InRelease of suite unstable"}},
		{"package of an architecture no index lists", func(tr *tree) {
			tr.add("evil", "1.0", evil)
			tr.m.Packages[0].Architecture = "arm64"
		}, []string{"package evil 1.0 (arm64)", "no index the signed Release of suite stable lists would list it (main/binary-arm64/Packages)"}},
		{"package relabelled", func(tr *tree) {
			tr.m.Packages[0].Version = "9.9"
		}, []string{index, `the manifest has version "9.9", the signed index "2.0"`}},
		{"package phased although the index says not", func(tr *tree) {
			tr.m.Packages[0].Phased = "0"
		}, []string{index, `the manifest has phased update percentage "0", the signed index ""`}},
		{"package left out", func(tr *tree) {
			tr.m.Packages = nil
		}, []string{index, "the signed index lists hello 2.0 (amd64) at pool/main/h/hello/hello_2.0_amd64.deb (line 1), which the manifest lacks"}},
		{"file at a pool path", func(tr *tree) {
			tr.set("pool/main/h/hello/hello_2.0_amd64.deb.evil", evil)
		}, []string{"pool/main/h/hello/hello_2.0_amd64.deb.evil is not in the directory of a signed suite"}},
		{"file outside dists and pool", func(tr *tree) {
			tr.set("index.html", evil)
		}, []string{"index.html is not in the directory of a signed suite"}},
		{"dists file Release does not list", func(tr *tree) {
			tr.set("dists/stable/main/binary-amd64/Packages.bz2", evil)
		}, []string{"dists/stable/main/binary-amd64/Packages.bz2 is not listed in the signed Release of suite stable"}},
		{"by-hash file under a hash Release does not list", func(tr *tree) {
			tr.set("dists/stable/main/binary-amd64/by-hash/SHA256/"+digest(evil), evil)
		}, []string{"dists/stable/main/binary-amd64/by-hash/SHA256/" + digest(evil) + " is not listed in the signed Release of suite stable"}},
		{"by-hash copy moved to another directory", func(tr *tree) {
			pk := tr.files["dists/stable/main/binary-amd64/Packages"]
			tr.set("dists/stable/main/binary-i386/by-hash/SHA256/"+digest(pk), pk)
		}, []string{"binary-i386/by-hash/SHA256/", "is not listed in the signed Release of suite stable"}},
		{"index Release lists is not served", func(tr *tree) {
			tr.unset("dists/stable/main/binary-amd64/Packages")
		}, []string{"suite stable, index main/binary-amd64/Packages: the signed Release lists it, but the manifest serves none of its forms"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := next()
			tc.spoil(tr)
			tr.m.Sort()
			sum := tr.publish(t, f.store)
			before := f.snapshot()
			for _, activate := range []bool{false, true} {
				expect := ""
				if activate {
					expect = id1
				}
				_, err := f.admin.RecordRelease(ctx, "demo", sum, activate, expect)
				apiErr := wantStatus(t, err, http.StatusUnprocessableEntity)
				for _, w := range tc.want {
					if apiErr.Code != "invalid_release" || !strings.Contains(apiErr.Message, w) {
						t.Errorf("error %s: %q\nwant invalid_release containing %q", apiErr.Code, apiErr.Message, w)
					}
				}
			}
			if after := f.snapshot(); after != before {
				t.Errorf("state changed:\n%s\n→\n%s", before, after)
			}
		})
	}
	tr := next()
	if _, err := f.admin.RecordRelease(ctx, "demo", tr.publish(t, f.store), true, id1); err != nil {
		t.Fatalf("the signed release: %v", err)
	}
}

// lyingStore serves other bytes for one object, as a store its attacker wrote to would.
type lyingStore struct {
	store.Store
	mu   sync.Mutex
	sum  string
	with []byte
}

func (l *lyingStore) lie(sum string, with []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sum, l.with = sum, with
}

func (l *lyingStore) Open(ctx context.Context, sum string, offset, length int64) (io.ReadCloser, error) {
	l.mu.Lock()
	lie, with := l.sum == sum, l.with
	l.mu.Unlock()
	if !lie {
		return l.Store.Open(ctx, sum, offset, length)
	}
	return io.NopCloser(bytes.NewReader(with)), nil
}

// TestRecordIndexFromALyingStore: an index the store serves with other bytes than its
// name (an extra stanza for a package the attacker uploaded) is refused as damage, not
// read, whichever form is read.
func TestRecordIndexFromALyingStore(t *testing.T) {
	var liar *lyingStore
	f := newFixtureWith(t, controld.Config{}, func(s store.Store) store.Store { liar = &lyingStore{Store: s}; return liar })
	ctx := context.Background()
	f.repo("demo")
	for _, gz := range []bool{false, true} {
		tr := newTree(t, "demo", "", "1.0", f.key)
		tr.gz = gz
		tr.index(t)
		evil := []byte("evil\n")
		tr.add("evil", "1.0", evil) // in the manifest, not in the signed index
		sum := tr.publish(t, f.store)
		name, form := "dists/stable/main/binary-amd64/Packages", []byte(nil)
		if gz {
			name += ".gz"
		}
		for _, x := range tr.m.Files {
			if x.Path == name {
				form = tr.files[x.Path]
				liar.lie(x.SHA256, append(bytes.Clone(form), "\nPackage: evil\nVersion: 1.0\nArchitecture: amd64\nFilename: pool/main/e/evil/evil_1.0_amd64.deb\nSize: 5\nSHA256: "+digest(evil)+"\n"...))
			}
		}
		if form == nil {
			t.Fatalf("no %s in the tree", name)
		}
		_, err := f.admin.RecordRelease(ctx, "demo", sum, true, "")
		apiErr := wantStatus(t, err, http.StatusUnprocessableEntity)
		if !strings.Contains(apiErr.Message, "the store is damaged") {
			t.Errorf("gz %v: %q, want the store named damaged", gz, apiErr.Message)
		}
	}
}

// TestRecordBoundsGzipIndexes: with indexes published as armor build publishes them
// (Packages.gz of chunked members, Packages.xz, the plain form listed but not served), a
// release that adds a package to a large index records, and a forged manifest is refused
// whether the index changed (read against the cached profile of its parent) or not
// (taken from the cache as it is).
func TestRecordBoundsGzipIndexes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	big := func(parent string, extra ...string) *tree {
		tr := newTree(t, "demo", parent, "1.0", f.key)
		tr.gz = true
		for i := range 6000 {
			tr.add(fmt.Sprintf("p%05d", i), "1", fmt.Appendf(nil, "package %d\n", i))
		}
		for _, name := range extra {
			tr.add(name, "1", []byte(name+"\n"))
		}
		tr.index(t)
		return tr
	}
	one := big("")
	if _, err := f.admin.RecordRelease(ctx, "demo", one.publish(t, f.store), true, ""); err != nil {
		t.Fatal(err)
	}
	evil := []byte("evil\n")
	put(t, f.store, evil)
	swap := func(tr *tree, name string) *tree {
		for i := range tr.m.Packages {
			if tr.m.Packages[i].Name == name {
				tr.m.Packages[i].SHA256, tr.m.Packages[i].Size = digest(evil), int64(len(evil))
				return tr
			}
		}
		t.Fatalf("no package %s", name)
		return nil
	}
	drop := func(tr *tree, name string) *tree {
		n := len(tr.m.Packages)
		tr.m.Packages = slices.DeleteFunc(tr.m.Packages, func(p manifest.Package) bool { return p.Name == name })
		if len(tr.m.Packages) != n-1 {
			t.Fatalf("no package %s", name)
		}
		return tr
	}
	extra := func(tr *tree) *tree { tr.add("evil", "1", evil); return tr } // not indexed again
	signed := 0                                                            // each signed release adds another package: recorded once, it is not verified again
	swapped := "the manifest has sha256 " + digest(evil)
	unlisted := "package evil 1 (amd64) in stable/main at pool/main/e/evil/evil_1_amd64.deb: the signed index does not list it"
	lacks := func(name string) string {
		return fmt.Sprintf("the signed index lists %s 1 (amd64) at pool/main/p/%s/%s_1_amd64.deb (line ", name, name, name)
	}
	for _, tc := range []struct {
		name string
		tree func() *tree
		want string // the refusal; "" for a release to record
	}{
		{"unchanged index, first package swapped", func() *tree { return swap(big(one.m.ID), "p00000") }, swapped},
		{"unchanged index, middle package swapped", func() *tree { return swap(big(one.m.ID), "p03000") }, swapped},
		{"unchanged index, last package swapped", func() *tree { return swap(big(one.m.ID), "p05999") }, swapped},
		{"unchanged index, extra package", func() *tree { return extra(big(one.m.ID)) }, unlisted},
		{"unchanged index, package dropped", func() *tree { return drop(big(one.m.ID), "p03000") }, lacks("p03000")},
		{"changed index, package far before the change swapped", func() *tree { return swap(big(one.m.ID, "p05000a"), "p00001") }, swapped},
		{"changed index, package far after the change swapped", func() *tree { return swap(big(one.m.ID, "p00002a"), "p05998") }, swapped},
		{"changed index, the new package swapped", func() *tree { return swap(big(one.m.ID, "p01000a"), "p01000a") }, swapped},
		{"changed index, extra package", func() *tree { return extra(big(one.m.ID, "p00002a")) }, unlisted},
		{"changed index, package far from the change dropped", func() *tree { return drop(big(one.m.ID, "p00002a"), "p04000") }, lacks("p04000")},
		{"changed index, signed", func() *tree { signed++; return big(one.m.ID, fmt.Sprintf("p03000%c", 'a'+signed)) }, ""},
	} {
		for _, cold := range []bool{false, true} {
			name := tc.name
			if cold {
				name += ", cold"
			}
			t.Run(name, func(t *testing.T) {
				if cold {
					defer f.srv.Cold()()
				}
				tr := tc.tree()
				sum := tr.publish(t, f.store)
				cached, incremental, whole := f.srv.IndexReads()
				follows := f.srv.ParentFollows()
				_, err := f.admin.RecordRelease(ctx, "demo", sum, false, "")
				c2, i2, w2 := f.srv.IndexReads()
				if tc.want != "" {
					apiErr := wantStatus(t, err, http.StatusUnprocessableEntity)
					if !strings.Contains(apiErr.Message, "suite stable, index main/binary-amd64/Packages") || !strings.Contains(apiErr.Message, tc.want) {
						t.Errorf("%q: want the index named and %q", apiErr.Message, tc.want)
					}
					return
				}
				if err != nil {
					t.Fatalf("signed release refused: %v", err)
				}
				switch {
				case cold && (c2 != cached || i2 != incremental || w2 != whole+1):
					t.Errorf("cold: indexes read: %d from the cache, %d against a profile, %d whole; want one whole", c2-cached, i2-incremental, w2-whole)
				case !cold && (c2 != cached || i2 != incremental+1 || w2 != whole):
					t.Errorf("indexes read: %d from the cache, %d against a profile, %d whole; want one against a profile",
						c2-cached, i2-incremental, w2-whole)
				}
				if want := map[bool]int64{false: 1, true: 0}[cold]; f.srv.ParentFollows()-follows != want {
					t.Errorf("%d indexes proven through the parent's packages, want %d", f.srv.ParentFollows()-follows, want)
				}
			})
		}
	}
}

// TestRecordIndexDecompressionBound: controld decompresses an index no further than the
// size Release lists for its uncompressed form, and holds what it decompresses to that
// size and SHA-256, as apt does: a signed Packages.gz that decompresses to more (a
// decompression bomb, or a Release listing the wrong sums) is refused.
func TestRecordIndexDecompressionBound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("demo")
	tr := newTree(t, "demo", "", "1.0", f.key)
	tr.gz = true
	tr.index(t)
	rel := "dists/stable/Release"
	// Release lists a smaller uncompressed Packages than what Packages.gz holds.
	var plain []byte
	for _, line := range bytes.SplitAfter(tr.files[rel], []byte("\n")) {
		if bytes.HasSuffix(line, []byte(" main/binary-amd64/Packages\n")) {
			fields := bytes.Fields(line)
			line = fmt.Appendf(nil, " %s %16d main/binary-amd64/Packages\n", fields[0], 10)
		}
		plain = append(plain, line...)
	}
	tr.set(rel, plain)
	tr.sign(t, f.key)
	_, err := f.admin.RecordRelease(ctx, "demo", tr.publish(t, f.store), true, "")
	apiErr := wantStatus(t, err, http.StatusUnprocessableEntity)
	if !strings.Contains(apiErr.Message, "suite stable, index main/binary-amd64/Packages: dists/stable/main/binary-amd64/Packages.gz: decompresses to more than Release lists for the uncompressed index") {
		t.Errorf("%q: want the index named and the bound", apiErr.Message)
	}
}
