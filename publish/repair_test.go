package publish_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/armor-apt/armor/publish"
)

// TestRepair: objects of the local release that the store lost, or holds with other
// bytes (same size or not), are uploaded again from the local tree by Repair, after which
// a check with --read-data finds nothing; an object the tree lacks too is named as
// unrepairable, and nothing else is touched.
func TestRepair(t *testing.T) {
	for _, k := range checkStores(t) {
		t.Run(k.name, func(t *testing.T) {
			s, damage := k.open(t)
			p := newPushProject(t, "")
			push(t, p, s)
			m := loadManifest(t, p.manifestPath())
			gone, short, flipped := m.Packages[0], m.Packages[1], m.Files[0]
			damage.remove(t, gone.SHA256)
			damage.write(t, short.SHA256, []byte("short"))
			data, err := os.ReadFile(filepath.Join(p.tree(), filepath.FromSlash(flipped.Path)))
			if err != nil {
				t.Fatal(err)
			}
			data[0] ^= 1
			damage.write(t, flipped.SHA256, data)

			o := publish.RepairOptions{Store: s, Manifest: p.manifestPath(), Tree: p.tree(), Cache: p.cache(), ReadData: true}
			r, err := publish.Repair(context.Background(), o)
			if err != nil {
				t.Fatalf("repair: %v", err)
			}
			if len(r.Repaired) != 3 || len(r.Unrepairable) != 0 {
				t.Fatalf("repaired %d, unrepairable %d; want 3 and 0: %+v", len(r.Repaired), len(r.Unrepairable), r.Check.Problems)
			}
			rel, err := publish.LocalRelease(p.manifestPath())
			if err != nil {
				t.Fatal(err)
			}
			after, err := publish.Check(context.Background(), publish.CheckOptions{Store: s, Releases: []publish.CheckRelease{rel}, ReadData: true})
			if err != nil || len(after.Problems) != 0 {
				t.Fatalf("check after repair: %v, problems %+v", err, after.Problems)
			}

			// Lost from the store and from the tree: named, not invented.
			damage.remove(t, gone.SHA256)
			if err := os.Remove(filepath.Join(p.tree(), filepath.FromSlash(gone.Path))); err != nil {
				t.Fatal(err)
			}
			r, err = publish.Repair(context.Background(), o)
			if !errors.Is(err, publish.ErrUnrepairable) || len(r.Unrepairable) != 1 || r.Unrepairable[0].SHA256 != gone.SHA256 {
				t.Fatalf("repair without the file: %v, %+v; want ErrUnrepairable naming %s", err, r, gone.Path)
			}
		})
	}
}
