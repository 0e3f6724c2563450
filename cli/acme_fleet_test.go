package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/internal/testkit/acmetest"
	"github.com/armor-apt/armor/internal/testkit/apttest"
	"github.com/armor-apt/armor/internal/testkit/synth"
)

// httpsEdge is an armor edged daemon serving HTTPS by ACME.
type httpsEdge struct {
	plain, admin, tls string
	log               string
	cmd               *exec.Cmd
}

// edgeEvents returns the edge's log records with message msg.
func (e *httpsEdge) events(t *testing.T, msg string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(e.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// renewals counts the edge's log records with message msg about a renewal.
func (e *httpsEdge) renewals(t *testing.T, msg string) int {
	n := 0
	for _, r := range e.events(t, msg) {
		if r["renewal"] == true {
			n++
		}
	}
	return n
}

// leaf makes a TLS handshake with the edge for host, trusting roots, and returns the
// certificate it served.
func (e *httpsEdge) leaf(host string, roots *x509.CertPool) (*x509.Certificate, error) {
	d := &tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: host}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", e.tls)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// TestSharedCertificates: three edges behind one name share their certificates
// through controld (acme_storage = "controld"). The first handshake at edge 0 orders
// the certificate from a real ACME CA (pebble), whose validation a balancer sends to
// edges 1 and 2 only: they answer from the shared storage. All three then serve that
// one certificate, and apt fetches over https through each. When the short-lived
// certificate falls due, the edge that renews it is killed (SIGKILL) while the CA
// validates; its lock expires, one survivor renews, the other loads what it stored.
func TestSharedCertificates(t *testing.T) {
	const host = "apt.fleet.test"
	const validity = 60 * time.Second
	work := t.TempDir()
	project := filepath.Join(work, "project")
	cas := filepath.Join(work, "store")
	data := filepath.Join(work, "controld")
	admin := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "admin",
		"--for", "*", "--action", "admin", "--action", "push", "--action", "activate"))
	edgeToken := strings.TrimSpace(armor(t, work, nil, "controld", "token", "--data-dir", data, "edge",
		"--for", "*", "--action", "read", "--action", "certs"))
	ctlURL := startControld(t, nil, filepath.Join(work, "controld.log"), "controld", "--data-dir", data, "--store", cas)
	armor(t, work, nil, "init", "--dir", project, "--name", "fleet", "--hostname", host,
		"--key-algo", "eddsa", "--store", cas, "--controld", ctlURL)
	debs := filepath.Join(project, "debs")
	if _, err := synth.WriteOne(debs, "hello-fleet", "1.0-1", "amd64", ""); err != nil {
		t.Fatal(err)
	}
	git(t, project, "init", "-q")
	armor(t, project, nil, "build")
	env := []string{"ARMOR_TOKEN=" + admin}
	armor(t, project, env, "repos", "create")
	armor(t, project, env, "push")

	// The CA's validations reach the edges through balancers, which never send them to
	// edge 0, where the first order is made. They are made first (pebble needs their
	// ports, the edges pebble's address) and told the edges' addresses once announced.
	httpLB := acmetest.NewBalancer(t, "127.0.0.1:0")
	tlsLB := acmetest.NewBalancer(t, "127.0.0.1:0")
	notFirst := func(n int) int { return 1 + n%2 }
	httpLB.Route(notFirst)
	tlsLB.Route(notFirst)
	peb := acmetest.Start(t, acmetest.Options{HTTPPort: httpLB.Port, TLSPort: tlsLB.Port, Validity: validity})
	roots, rootPEM := peb.Root(t)
	edges := make([]*httpsEdge, 3)
	var plains, tlss []string
	for i := range edges {
		e := &httpsEdge{log: filepath.Join(work, fmt.Sprintf("edge%d.log", i))}
		edges[i] = e
		cfg := fmt.Sprintf(`listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
tls_listen = "127.0.0.1:0"
controld = %q
store = %q
state_dir = %q
acme_ca = %q
acme_ca_root = %q
acme_email = "ops@fleet.test"
acme_storage = "controld"
acme_lock_ttl = "4s"
acme_renew_interval = "1s"
`, ctlURL, cas, filepath.Join(work, fmt.Sprintf("edge%d", i)), peb.Dir, peb.CAFile)
		file := filepath.Join(work, fmt.Sprintf("edged%d.toml", i))
		if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		p, addrs := startAnnounced(t, []string{"ARMOR_EDGE_TOKEN=" + edgeToken}, e.log, "edged listening",
			"edged", "--config-file", file, "--log-format", "json")
		e.cmd, e.plain, e.admin, e.tls = p.cmd, addrs["listen"], addrs["admin"], addrs["tls"]
		plains, tlss = append(plains, e.plain), append(tlss, e.tls)
	}
	httpLB.SetBackends(plains...)
	tlsLB.SetBackends(tlss...)
	for _, e := range edges {
		waitHTTP(t, "http://"+e.admin+"/readyz")
	}

	// 1. One order, validated by edges 1 and 2, and one certificate served by all.
	first, err := edges[0].leaf(host, roots)
	if err != nil {
		t.Fatalf("first handshake at edge 0: %v\npebble:\n%s", err, peb.Output())
	}
	for i, e := range edges {
		leaf, err := e.leaf(host, roots)
		if err != nil || leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
			t.Fatalf("edge %d serves %v (%v); want the certificate edge 0 obtained, serial %x", i, leaf, err, first.SerialNumber)
		}
	}
	if n := peb.Orders(); n != 1 {
		t.Fatalf("%d orders for one hostname on three edges; want 1", n)
	}
	validated := map[string]int{}
	for k, v := range httpLB.Sent() {
		validated[k] += v
	}
	for k, v := range tlsLB.Sent() {
		validated[k] += v
	}
	if validated[edges[0].plain]+validated[edges[0].tls] != 0 || validated[edges[1].plain]+validated[edges[1].tls]+validated[edges[2].plain]+validated[edges[2].tls] == 0 {
		t.Fatalf("validations reached %v; want edges 1 and 2 only", validated)
	}
	t.Logf("first certificate %x, validated through %v", first.SerialNumber, validated)

	// 2. apt over https through each edge.
	caFile := filepath.Join(work, "pebble-root.pem")
	if err := os.WriteFile(caFile, rootPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, e := range edges {
		aptThrough(t, e.tls, host, caFile, project, fmt.Sprintf("edge %d", i))
	}

	// 3. The renewal: held at the CA's validation, its edge is killed. An on-demand
	// certificate is renewed when a handshake finds it due, as apt clients' do.
	stopClients := make(chan struct{})
	clientsDone := make(chan struct{})
	go func() {
		defer close(clientsDone)
		for {
			for _, e := range edges {
				go e.leaf(host, roots)
			}
			select {
			case <-stopClients:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	defer func() {
		close(stopClients)
		<-clientsDone
	}()
	held := httpLB.Hold()
	heldTLS := tlsLB.Hold()
	renewing := -1
	deadline := time.Now().Add(validity)
	for renewing < 0 {
		select {
		case <-held:
		case <-heldTLS:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("no renewal validated within the certificate's lifetime\npebble:\n%s", peb.Output())
		}
		for i, e := range edges {
			if e.renewals(t, "obtaining a certificate") > 0 {
				renewing = i
			}
		}
		if renewing < 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("edge %d renews; killing it while the CA validates", renewing)
	if err := edges[renewing].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var survivors []int
	for i := range edges {
		if i != renewing {
			survivors = append(survivors, i)
		}
	}
	route := func(n int) int { return survivors[n%2] }
	httpLB.Route(route)
	tlsLB.Route(route)
	httpLB.Release()
	tlsLB.Release()

	// 4. A survivor takes the lock once it expires and renews; the other loads it.
	var renewed *x509.Certificate
	deadline = time.Now().Add(45 * time.Second)
	for {
		a, errA := edges[survivors[0]].leaf(host, roots)
		b, errB := edges[survivors[1]].leaf(host, roots)
		if errA == nil && errB == nil && a.SerialNumber.Cmp(first.SerialNumber) != 0 && a.SerialNumber.Cmp(b.SerialNumber) == 0 {
			renewed = a
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the survivors did not both serve a renewed certificate: %v %v / %v %v\npebble:\n%s", a, errA, b, errB, peb.Output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !renewed.NotAfter.After(first.NotAfter) {
		t.Fatalf("renewed certificate expires %v, not after the first's %v", renewed.NotAfter, first.NotAfter)
	}
	obtained := 0
	for _, i := range survivors {
		obtained += edges[i].renewals(t, "certificate obtained")
	}
	if obtained != 1 {
		t.Fatalf("the survivors obtained %d renewed certificates; want 1", obtained)
	}
	if n := peb.Orders(); n != 3 {
		t.Fatalf("%d orders; want 3: the first, the killed edge's renewal, the survivor's", n)
	}
	aptThrough(t, edges[survivors[1]].tls, host, caFile, project, "a survivor after the renewal")
}

// aptThrough runs apt-get update and a download over https through one edge's HTTPS
// listener, trusting caFile, and checks the package downloaded is the one published.
func aptThrough(t *testing.T, tlsAddr, host, caFile, project, what string) {
	t.Helper()
	proxy, asked := acmetest.ConnectProxy(t, tlsAddr)
	apt := apttest.New(t, apttest.Options{
		Sources: []apttest.Source{{URI: "https://" + host + "/", Suites: []string{"stable"}, Components: []string{"main"},
			SignedBy: filepath.Join(project, "keys", "fleet-archive-keyring.gpg")}},
		Extra: []string{"Acquire::https::Proxy=http://" + proxy, "Acquire::https::CaInfo=" + caFile},
	})
	apt.Update(t)
	files := apt.Download(t, "hello-fleet")
	got, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(project, "debs", filepath.Base(files[0])))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("apt over https through %s: %s differs from the published package (%v)", what, filepath.Base(files[0]), err)
	}
	if len(asked()) == 0 {
		t.Fatalf("apt over https through %s made no CONNECT", what)
	}
}
