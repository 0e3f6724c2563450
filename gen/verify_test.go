package gen_test

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/gen"
)

// TestVerifyTree builds a tree, damages it in one way per case, and checks that
// VerifyTree reports exactly that damage, naming the file; the undamaged tree verifies.
func TestVerifyTree(t *testing.T) {
	const (
		packages   = "dists/stable/main/binary-amd64/Packages"
		packagesGz = packages + ".gz"
		packagesXz = packages + ".xz"
		poolFile   = "pool/main/libn/libnatpmp/natpmpc_20150609-7.1+b2_amd64.deb"
	)
	for _, tc := range []struct {
		name   string
		pool   bool
		damage func(t *testing.T, r *repo) // nil: the tree is intact
		want   []string                    // one substring per expected problem, in order
	}{
		{name: "intact", pool: true},
		{
			name: "tampered Packages.gz",
			damage: func(t *testing.T, r *repo) {
				flipByte(t, r.tree(packagesGz), 10)
			},
			want: []string{packagesGz + ": size or hashes differ from Release"},
		},
		{
			name: "Packages.gz missing: the uncompressed index is checked through its .xz",
			damage: func(t *testing.T, r *repo) {
				if err := os.Remove(r.tree(packagesGz)); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{packagesGz + ": missing"},
		},
		{
			name: "no compressed Packages",
			damage: func(t *testing.T, r *repo) {
				for _, p := range []string{packagesGz, packagesXz} {
					if err := os.Remove(r.tree(p)); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []string{packagesGz + ": missing", packagesXz + ": missing", packages + ": not published, and no compressed form of it could be fetched"},
		},
		{
			name: "stale uncompressed Packages",
			damage: func(t *testing.T, r *repo) {
				writeFile(t, r.tree(packages), []byte("Package: stale\n"))
			},
			want: []string{packages + ": size or hashes differ from Release"},
		},
		{
			name: "missing by-hash file",
			damage: func(t *testing.T, r *repo) {
				if err := os.Remove(r.tree(byHashOf(t, r, packagesGz))); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"/by-hash/SHA256/"},
		},
		{
			name: "tampered pool file",
			pool: true,
			damage: func(t *testing.T, r *repo) {
				flipByte(t, r.tree(poolFile), 200)
			},
			want: []string{poolFile + ": SHA256"},
		},
		{
			name: "Release differs from InRelease",
			damage: func(t *testing.T, r *repo) {
				p := r.tree("dists/stable/Release")
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, p, bytes.Replace(data, []byte("Label: armor test"), []byte("Label: armor fake"), 1))
			},
			// Release.gpg no longer matches the altered Release either.
			want: []string{"dists/stable/Release differs from the text signed in InRelease", "dists/stable/Release.gpg: verify detached signature"},
		},
		{
			name: "InRelease signed by another key",
			damage: func(t *testing.T, r *repo) {
				release, err := os.ReadFile(r.tree("dists/stable/Release"))
				if err != nil {
					t.Fatal(err)
				}
				in, err := fixtureKey(t, "eddsa").Clearsign(release, crypto.SHA512)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, r.tree("dists/stable/InRelease"), in)
			},
			want: []string{"dists/stable/InRelease: signature"},
		},
		{
			name: "Release.gpg signed by another key",
			damage: func(t *testing.T, r *repo) {
				release, err := os.ReadFile(r.tree("dists/stable/Release"))
				if err != nil {
					t.Fatal(err)
				}
				sig, err := fixtureKey(t, "eddsa").DetachSign(release, crypto.SHA512)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, r.tree("dists/stable/Release.gpg"), sig)
			},
			want: []string{"dists/stable/Release.gpg"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t, repoConfig{Real: true, Synth: 2})
			r.mustBuild()
			if tc.damage != nil {
				tc.damage(t, r)
			}
			rep, err := gen.VerifyTree(context.Background(), dirFetcher(r.Opts.TreeDir), gen.VerifyOptions{
				Suites:   []string{"stable"},
				Keyrings: [][]byte{publicKeyring(t, r.Opts.Key)},
				Pool:     tc.pool,
				Now:      testDate,
			})
			if rep == nil {
				t.Fatalf("no report (err %v)", err)
			}
			if len(tc.want) == 0 {
				if err != nil || len(rep.Problems) != 0 {
					t.Fatalf("intact tree: %v, problems %q", err, rep.Problems)
				}
				// 2 architectures x (3 forms of Packages + 2 of Contents); 6 packages, one of
				// them listed in both indexes but counted once.
				if rep.Suites != 1 || rep.Indexes != 10 || rep.PoolFiles != 6 {
					t.Errorf("report %+v: want 1 suite, 10 indexes, 6 pool files", rep)
				}
				return
			}
			if !errors.Is(err, gen.ErrVerify) {
				t.Errorf("error %v does not wrap ErrVerify", err)
			}
			ok := len(rep.Problems) == len(tc.want)
			for i := 0; ok && i < len(tc.want); i++ {
				ok = strings.Contains(rep.Problems[i], tc.want[i])
			}
			if !ok {
				t.Errorf("problems:\n%q\nwant one containing each of:\n%q", rep.Problems, tc.want)
			}
		})
	}
}

// TestVerifyTreeExpired: a Release past its Valid-Until is reported.
func TestVerifyTreeExpired(t *testing.T) {
	r := newRepo(t, repoConfig{Synth: 2})
	r.Opts.Suites[0].ValidFor = 24 * time.Hour
	r.mustBuild()
	o := gen.VerifyOptions{Suites: []string{"stable"}, Keyrings: [][]byte{publicKeyring(t, r.Opts.Key)}, Now: testDate}
	if _, err := gen.VerifyTree(context.Background(), dirFetcher(r.Opts.TreeDir), o); err != nil {
		t.Errorf("within Valid-Until: %v", err)
	}
	o.Now = testDate.Add(25 * time.Hour)
	rep, err := gen.VerifyTree(context.Background(), dirFetcher(r.Opts.TreeDir), o)
	if err == nil || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "expired") {
		t.Errorf("after Valid-Until: err %v, problems %q; want one about expiry", err, rep.Problems)
	}
}

// flipByte inverts one byte of a file in place.
func flipByte(t *testing.T, path string, at int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[at] ^= 0xff
	writeFile(t, path, data)
}

// byHashOf returns the by-hash path of an index file of the last build.
func byHashOf(t *testing.T, r *repo, index string) string {
	t.Helper()
	for _, f := range r.Last.Files {
		if f.Path == index {
			return index[:strings.LastIndexByte(index, '/')] + "/by-hash/SHA256/" + f.SHA256
		}
	}
	t.Fatalf("%s is not in the manifest", index)
	return ""
}
