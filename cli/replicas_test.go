package cli_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/pgtest"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// TestReplicasOnPostgres is the move to replicas as an operator makes it, with the
// binary: a bbolt controld with a pushed release is stopped and migrated into
// PostgreSQL; two controld replicas run on the database; a token is made offline there
// while they run; an edge polls replica B while a push goes through replica A and is
// served within seconds (B's long poll wakes); with the database down, the edge keeps
// serving and controld answers 503.
func TestReplicasOnPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	db := pg.Database(t)
	work := t.TempDir()
	project := filepath.Join(work, "project")
	cas := filepath.Join(work, "store")
	addrA, addrB, edgeAddr, adminAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	const host = "apt.replicas.test"

	armor(t, work, nil, "init", "--dir", project, "--name", "replicas", "--hostname", host,
		"--key-algo", "rsa3072", "--store", cas, "--controld", "http://"+addrA)
	debs := filepath.Join(project, "debs")
	old, err := synth.WriteOne(debs, "hello-replica", "1.0-1", "amd64", "")
	if err != nil {
		t.Fatal(err)
	}
	git(t, project, "init", "-q")
	armor(t, project, nil, "build")

	// 1. One controld on bbolt, with a release pushed.
	data := filepath.Join(work, "controld")
	admin := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate", "--action", "read"))
	env := []string{"ARMOR_TOKEN=" + admin}
	single := daemon(t, nil, filepath.Join(work, "controld-bolt.log"), "controld", "--listen", addrA, "--data-dir", data, "--store", cas)
	waitHTTP(t, "http://"+addrA+"/v1/healthz")
	armor(t, project, env, "repos", "create")
	armor(t, project, env, "push")
	single.Process.Signal(os.Interrupt)
	single.Wait()

	// 2. Migrated into PostgreSQL, then served by two replicas.
	out := armor(t, work, nil, "controld", "migrate", "--from", "bolt:"+data, "--to", db)
	if !strings.Contains(out, "migrated 1 repositories, 1 releases") || !strings.Contains(out, "1 tokens") {
		t.Fatalf("migrate said:\n%s", out)
	}
	daemon(t, nil, filepath.Join(work, "controld-a.log"), "controld", "--listen", addrA, "--database", db, "--store", cas)
	daemon(t, nil, filepath.Join(work, "controld-b.log"), "controld", "--listen", addrB, "--database", db, "--store", cas)
	waitHTTP(t, "http://"+addrA+"/v1/healthz")
	waitHTTP(t, "http://"+addrB+"/v1/healthz")
	edgeToken := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--database", db, "edge", "--for", "*", "--action", "read"))
	daemon(t, []string{"ARMOR_EDGE_TOKEN=" + edgeToken}, filepath.Join(work, "edged.log"), "edged",
		"--listen", edgeAddr, "--admin-listen", adminAddr, "--controld", "http://"+addrB,
		"--store", cas, "--state-dir", filepath.Join(work, "edged"))
	waitHTTP(t, "http://"+adminAddr+"/healthz")
	tree := filepath.Join(project, "public")
	waitServed(t, edgeAddr, host, tree) // the migrated active release, through B

	// 3. A push through A reaches the edge polling B well within its 30s long poll.
	if _, err := synth.WriteOne(debs, "hello-replica", "1.1-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	armor(t, project, nil, "build")
	time.Sleep(time.Second) // the edge is in its long poll on B
	if out := armor(t, project, env, "push"); !strings.Contains(out, "recorded and activated") {
		t.Fatalf("push through A: %s", out)
	}
	waitServed(t, edgeAddr, host, tree)

	// 4. The database goes away: controld answers 503, the edge keeps serving.
	pg.Stop()
	out, err = armorErr(project, env, "status")
	if err == nil || !strings.Contains(out, "503") {
		t.Errorf("status with the database down: %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(tree, "dists", "stable", "InRelease"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the edge has noticed controld failing
	req, _ := http.NewRequest("GET", "http://"+edgeAddr+"/dists/stable/InRelease", nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(resp); resp.StatusCode != 200 || !bytes.Equal(got, want) {
		t.Errorf("edge with controld's database down: %d\n%s", resp.StatusCode, got)
	}

	// 5. A controld started while the database is down exits at once, saying where.
	out, err = armorErr(work, nil, "controld", "--listen", freeAddr(t), "--database", db+"&connect_timeout=3", "--store", cas)
	if err == nil || !strings.Contains(out, "unreachable") || !strings.Contains(out, fmt.Sprintf("127.0.0.1:%d/", pg.Port())) {
		t.Errorf("controld on a database that is down: %v\n%s", err, out)
	}
}
