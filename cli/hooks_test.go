package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/internal/testkit/hooktest"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// TestHooksCLI: armor hooks add, list, log, ping and remove, as an operator runs them
// against a controld daemon: a webhook of the repository of armor.toml hears of a push
// (its record and its activation), signed with the secret add printed, and the log
// shows the deliveries made.
func TestHooksCLI(t *testing.T) {
	work := t.TempDir()
	project := filepath.Join(work, "project")
	addr := freeAddr(t)
	armor(t, work, nil, "init", "--dir", project, "--name", "hooked", "--hostname", "apt.hooked.test",
		"--key-algo", "eddsa", "--store", filepath.Join(work, "store"), "--controld", "http://"+addr)
	if _, err := synth.WriteOne(filepath.Join(project, "debs"), "hello-hook", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	git(t, project, "init", "-q")
	armor(t, project, nil, "build")
	data := filepath.Join(work, "controld")
	admin := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate"))
	daemon(t, nil, filepath.Join(work, "controld.log"), "controld", "--listen", addr, "--data-dir", data, "--store", filepath.Join(work, "store"))
	waitHTTP(t, "http://"+addr+"/v1/healthz")
	env := []string{"ARMOR_TOKEN=" + admin}
	armor(t, project, env, "repos", "create")

	rcv := hooktest.Start(t)
	var created api.CreateHookResponse
	if err := json.Unmarshal([]byte(armor(t, project, env, "--json", "hooks", "add", rcv.URL, "--event", "activate", "--event", "record")), &created); err != nil {
		t.Fatal(err)
	}
	if created.Hook.Repositories[0] != "hooked" || created.Secret == "" {
		t.Fatalf("hooks add: %+v", created)
	}
	rcv.Trust(created.Hook.ID, created.Secret)
	if secret := strings.TrimSpace(armor(t, project, env, "hooks", "add", rcv.URL, "--event", "gc", "--for", "*")); !strings.HasPrefix(secret, "armorhook_") {
		t.Fatalf("hooks add printed %q; want the secret alone", secret)
	}

	armor(t, project, env, "push")
	got := rcv.Wait(t, 20*time.Second, "the push's record and activation", func(r []hooktest.Received) bool { return len(r) == 2 })
	if got[0].Event == got[1].Event || got[0].Payload.Repository != "hooked" {
		t.Fatalf("deliveries: %+v", got)
	}
	if list := armor(t, project, env, "hooks", "list"); !strings.Contains(list, created.Hook.ID) || !strings.Contains(list, "activate,record") ||
		strings.Count(list, "\n") != 3 {
		t.Fatalf("hooks list:\n%s", list)
	}
	log := armor(t, project, env, "hooks", "log", created.Hook.ID)
	if strings.Count(log, "delivered") != 2 || !strings.Contains(log, "HTTP 204") {
		t.Fatalf("hooks log:\n%s", log)
	}
	if out := armor(t, project, env, "hooks", "ping", created.Hook.ID); !strings.Contains(out, "ping queued") {
		t.Fatalf("hooks ping: %s", out)
	}
	rcv.Wait(t, 20*time.Second, "the ping", func(r []hooktest.Received) bool { return len(r) == 3 && r[2].Event == "ping" })
	armor(t, project, env, "hooks", "remove", created.Hook.ID)
	if list := armor(t, project, env, "hooks", "list"); strings.Contains(list, created.Hook.ID) {
		t.Fatalf("hooks list after remove:\n%s", list)
	}
	if r := rcv.Rejected(); len(r) != 0 {
		t.Fatalf("rejected deliveries: %v", r)
	}
}
