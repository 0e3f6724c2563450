package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/testkit/s3test"
	"github.com/armor-apt/armor/internal/testkit/synth"
	"github.com/armor-apt/armor/store"
	"github.com/armor-apt/armor/store/storetest"
)

// storeSize lists the store and returns its object count and bytes.
func storeSize(t *testing.T, s store.Store) (map[string]store.Listed, int64) {
	t.Helper()
	objs := storetest.List(t, s)
	var bytes int64
	for _, o := range objs {
		bytes += o.Size
	}
	return objs, bytes
}

// TestGCOnS3 pushes four releases to a real S3 server through a real controld, lets the
// retention window of the old ones pass, and collects: the store shrinks by what the
// report says, a dry run deletes nothing, an unrecorded upload younger than the grace
// period survives, the active release cannot be deleted, and every kept release still
// verifies through a real edged.
func TestGCOnS3(t *testing.T) {
	work := t.TempDir()
	project := filepath.Join(work, "project")
	s3 := s3test.Start(t)
	remote := s3.Remote("armor", "store")
	const host = "apt.gc.test"

	data := filepath.Join(work, "controld")
	admin := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate", "--action", "read"))
	edgeToken := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "edge", "--for", "*", "--action", "read"))
	conf := filepath.Join(work, "controld.toml")
	const grace = 6 * time.Second
	err := os.WriteFile(conf, []byte("gc_grace = \"6s\"\ngc_keep_last = 1\ngc_keep_drafts = \"1s\"\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	controldURL := startControld(t, nil, filepath.Join(work, "controld.log"), "controld", "run", "--config-file", conf,
		"--data-dir", data, "--store", remote)
	edgeAddr, _ := startEdge(t, []string{"ARMOR_EDGE_TOKEN=" + edgeToken}, filepath.Join(work, "edged.log"), "edged",
		"--controld", controldURL, "--store", remote, "--state-dir", filepath.Join(work, "edged"))
	armor(t, work, nil, "init", "--dir", project, "--name", "gc", "--hostname", host,
		"--key-algo", "rsa3072", "--store", remote, "--controld", controldURL)
	debs := filepath.Join(project, "debs")

	env := []string{"ARMOR_TOKEN=" + admin}
	armor(t, project, env, "repos", "create", "--retention", "1s")
	tree := filepath.Join(project, "public")
	saved := filepath.Join(work, "v3")
	var ids []string
	var last string
	for i, v := range []string{"1.0-1", "1.1-1", "1.2-1", "1.3-1"} {
		if last != "" {
			if err := os.Remove(last); err != nil {
				t.Fatal(err)
			}
		}
		if last, err = synth.WriteOne(debs, "hello-gc", v, "amd64", ""); err != nil {
			t.Fatal(err)
		}
		armor(t, project, nil, "build")
		var res struct{ Release string }
		if err := json.Unmarshal([]byte(armor(t, project, env, "push", "--json")), &res); err != nil || res.Release == "" {
			t.Fatalf("push %s: %v %+v", v, err, res)
		}
		ids = append(ids, res.Release)
		if i == 2 { // what a rollback from the last one activates: kept
			if err := os.CopyFS(saved, os.DirFS(tree)); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitServed(t, edgeAddr, host, tree)
	time.Sleep(grace + time.Second) // the windows of 1.0 and 1.1 end, their uploads age

	ctx := context.Background()
	cas, err := store.OpenRclone(ctx, remote)
	if err != nil {
		t.Fatal(err)
	}
	before, bytesBefore := storeSize(t, cas)

	gc := func(args ...string) api.GCReport {
		t.Helper()
		var rep api.GCReport
		out := armor(t, project, env, append([]string{"gc", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("armor gc --json: %v\n%s", err, out)
		}
		return rep
	}
	dry := gc("--dry-run")
	if after, _ := storeSize(t, cas); len(after) != len(before) {
		t.Fatalf("gc --dry-run changed the store: %d objects, was %d", len(after), len(before))
	}
	if !dry.DryRun || len(dry.Releases) != 2 || dry.Deleted == 0 || dry.Young != 0 || dry.Objects != len(before) || dry.Bytes != bytesBefore {
		t.Fatalf("dry run report %+v; want 2 releases and some objects to go of %d (%d bytes)", dry, len(before), bytesBefore)
	}
	out := armor(t, project, env, "gc", "--dry-run")
	if !strings.Contains(out, "would delete 2 releases") || !strings.Contains(out, "nothing was deleted") {
		t.Errorf("armor gc --dry-run says:\n%s", out)
	}

	if out, err := armorErr(project, env, "releases", "delete", ids[3][:12]); err == nil || !strings.Contains(out, "it is the active release") {
		t.Fatalf("deleting the active release: %v\n%s", err, out)
	}

	// A push in flight has uploaded an object and not yet recorded its release.
	young := storetest.NewObject([]byte("uploaded by a push that has not recorded its release yet"))
	storetest.Put(t, cas, young)
	before, bytesBefore = storeSize(t, cas)
	rep := gc()
	after, bytesAfter := storeSize(t, cas)
	if rep.DryRun || rep.Deleted != dry.Deleted || rep.DeletedBytes != dry.DeletedBytes || rep.Young != 1 || len(rep.Releases) != 2 ||
		rep.Releases[0].ID != ids[0] || rep.Releases[1].ID != ids[1] || rep.KeptReleases != 2 {
		t.Errorf("gc report %+v; want what the dry run said (%d objects, %d bytes), 1 young, releases 1.0, 1.1 deleted", rep, dry.Deleted, dry.DeletedBytes)
	}
	if len(after) != len(before)-rep.Deleted || bytesAfter != bytesBefore-rep.DeletedBytes {
		t.Errorf("store went from %d objects (%d bytes) to %d (%d); the report says %d (%d bytes) deleted",
			len(before), bytesBefore, len(after), bytesAfter, rep.Deleted, rep.DeletedBytes)
	}
	if rep.Deleted == 0 || bytesAfter >= bytesBefore {
		t.Errorf("the store did not shrink: %d → %d bytes", bytesBefore, bytesAfter)
	}
	if _, ok := after[young.Sum]; !ok {
		t.Errorf("an unrecorded upload younger than the grace period was deleted")
	}
	var left []api.Release
	if err := json.Unmarshal([]byte(armor(t, project, env, "releases", "list", "--json")), &left); err != nil ||
		len(left) != 2 || left[0].ID != ids[3] || left[1].ID != ids[2] {
		t.Errorf("releases after gc: %+v (%v); want 1.3 and 1.2", left, err)
	}

	// Every kept release is whole in the store and verifies through the edge.
	armor(t, project, env, "store", "check")
	keyring := filepath.Join(project, "keys", "gc-archive-keyring.gpg")
	verify := func() {
		t.Helper()
		out := armor(t, project, []string{"HTTP_PROXY=http://" + edgeAddr}, "verify", "http://"+host+"/",
			"--suite", "stable", "--pool", "--keyring", keyring)
		if !strings.Contains(out, "ok: 1 suite(s)") {
			t.Fatalf("verify through the edge: %s", out)
		}
	}
	verify()
	armor(t, project, env, "rollback", "--pointer-only") // serves release 1.2 itself
	waitServed(t, edgeAddr, host, saved)
	verify()
}
