package controld_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
)

// TestCertStorageAPI: only a token with the certs action on "*" reaches the edges'
// certificate storage; files round-trip byte for byte; a lock held by one edge is a
// 409 naming it for another, until it is freed or its lease ends.
func TestCertStorageAPI(t *testing.T) {
	f := newFixture(t)
	f.repo("demo")
	mk := func(name string, repos []string, actions ...string) string {
		out, err := f.admin.CreateToken(context.Background(), name, repos, actions)
		if err != nil {
			t.Fatal(err)
		}
		return out.Secret
	}
	edge := mk("edge", []string{"*"}, "read", "certs")
	reader := mk("reader", []string{"*"}, "read", "push", "activate", "admin")
	scoped := mk("scoped", []string{"demo"}, "read", "certs")
	key := "/v1/certs/files/certificates/acme-v02/apt.demo.test/apt.demo.test.key"
	secret := "-----BEGIN EC PRIVATE KEY-----\n\x00\xffbinary\n"

	for _, tok := range []string{reader, scoped} {
		if st, body := f.rawRequest(http.MethodGet, key, tok, nil); st != 403 || !strings.Contains(body, "certs action") {
			t.Fatalf("GET with a token without certs on *: %d %s", st, body)
		}
	}
	if st, _ := f.rawRequest(http.MethodGet, key, edge, nil); st != 404 {
		t.Fatalf("GET of a missing file: %d", st)
	}
	if st, body := f.rawRequest(http.MethodPut, key, edge, []byte(secret)); st != 204 {
		t.Fatalf("PUT: %d %s", st, body)
	}
	if st, body := f.rawRequest(http.MethodGet, key, edge, nil); st != 200 || body != secret {
		t.Fatalf("GET: %d %q", st, body)
	}
	for _, bad := range []string{"/v1/certs/files/a%2F..%2Fb", "/v1/certs/files/", "/v1/certs/files/a%20b", "/v1/certs/files/a%2F%2Fb"} {
		if st, body := f.rawRequest(http.MethodPut, bad, edge, []byte("x")); st != 400 && st != 404 {
			t.Fatalf("PUT %s: %d %s", bad, st, body)
		}
	}
	st, body := f.rawRequest(http.MethodGet, "/v1/certs/list?prefix=certificates", edge, nil)
	var list []api.CertFileInfo
	if st != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 || list[0].Size != int64(len(secret)) {
		t.Fatalf("list: %d %s", st, body)
	}

	lock := func(holder, ttl string) (int, api.ErrorBody, api.CertLock) {
		st, body := f.rawRequest(http.MethodPost, "/v1/certs/locks/issue_cert_apt.demo.test", edge, []byte(`{"holder":"`+holder+`","ttl":"`+ttl+`"}`))
		var eb api.ErrorBody
		var l api.CertLock
		json.Unmarshal([]byte(body), &eb)
		json.Unmarshal([]byte(body), &l)
		return st, eb, l
	}
	if st, _, l := lock("edge-1", "30s"); st != 200 || l.Holder != "edge-1" || !l.Until.After(f.clock.Now()) {
		t.Fatalf("lock: %d %+v", st, l)
	}
	if st, eb, _ := lock("edge-2", "30s"); st != 409 || eb.Error.Code != api.CodeLocked || eb.Error.Lock == nil || eb.Error.Lock.Holder != "edge-1" {
		t.Fatalf("lock held by another: %d %+v", st, eb)
	}
	if st, eb, _ := lock("edge-2", "2h"); st != 400 || !strings.Contains(eb.Error.Message, "ttl") {
		t.Fatalf("a ttl over an hour: %d %+v", st, eb)
	}
	if st, body := f.rawRequest(http.MethodDelete, "/v1/certs/locks/issue_cert_apt.demo.test?holder=edge-2", edge, nil); st != 409 {
		t.Fatalf("unlock by another holder: %d %s", st, body)
	}
	f.clock.Add(31 * time.Second) // edge-1 died: its lease ends
	if st, _, l := lock("edge-2", "30s"); st != 200 || l.Holder != "edge-2" {
		t.Fatalf("an expired lock: %d %+v", st, l)
	}
	if st, _ := f.rawRequest(http.MethodDelete, "/v1/certs/locks/issue_cert_apt.demo.test?holder=edge-2", edge, nil); st != 204 {
		t.Fatalf("unlock: %d", st)
	}
	if st, body := f.rawRequest(http.MethodDelete, "/v1/certs/files/certificates", edge, nil); st != 200 || !strings.Contains(body, `"deleted": 1`) {
		t.Fatalf("delete: %d %s", st, body)
	}
}
