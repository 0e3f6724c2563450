package controld_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
)

func TestHappyPath(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r, err := f.admin.CreateRepo(ctx, api.CreateRepoRequest{
		Name: "demo", Hostnames: []string{"APT.Example.TEST:8080", "bücher.example."},
		Keys: []string{publicKey(t, f.key)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Hostnames, ","); got != "apt.example.test,xn--bcher-kva.example" {
		t.Errorf("hostnames = %s, want normalised and sorted", got)
	}
	if len(r.Keys) != 1 || r.Keys[0].Fingerprint != f.key.Fingerprint() || r.Retention.D() != 48*time.Hour || r.Active != nil {
		t.Errorf("repository = %+v", r)
	}

	// First release, recorded and activated in one request.
	id1, sum1 := f.release("demo", "", "1.0")
	rec, err := f.admin.RecordRelease(ctx, "demo", sum1, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Created || rec.Release.ID != id1 || rec.Release.Manifest != sum1 || rec.Release.PushedBy != "root" ||
		rec.Release.Signer != f.key.Fingerprint() || rec.Release.Packages != 1 || rec.Activation == nil || rec.Activation.To != id1 {
		t.Errorf("record = %+v", rec)
	}
	// Recording it again is idempotent: the original record.
	f.clock.Add(time.Minute)
	again, err := f.admin.RecordRelease(ctx, "demo", sum1, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || again.Release != rec.Release {
		t.Errorf("re-record = %+v, want the original %+v", again, rec.Release)
	}

	// Second release, recorded, then activated by compare-and-swap.
	id2, sum2 := f.release("demo", id1, "2.0")
	if _, err := f.admin.RecordRelease(ctx, "demo", sum2, false, ""); err != nil {
		t.Fatal(err)
	}
	_, err = f.admin.Activate(ctx, "demo", id2, "")
	if apiErr := wantStatus(t, err, http.StatusConflict); !errors.Is(err, client.ErrConflict) || !apiErr.HasActive || apiErr.Active != id1 {
		t.Errorf("stale activation: %+v, want a conflict naming %s", apiErr, id1)
	}
	a, err := f.admin.Activate(ctx, "demo", id2, id1)
	if err != nil {
		t.Fatal(err)
	}
	if a.From != id1 || a.To != id2 || a.Seq != 2 || a.By != "root" {
		t.Errorf("activation = %+v", a)
	}
	st, err := f.admin.Status(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if st.Active == nil || st.Active.Release != id2 || st.Previous != id1 || st.Releases != 2 || st.Latest.ID != id2 ||
		len(st.Retained) != 1 || st.Retained[0].ID != id1 {
		t.Errorf("status = %+v", st)
	}

	// Rollback returns to the previous release, also by compare-and-swap.
	_, err = f.admin.Rollback(ctx, "demo", id1)
	wantStatus(t, err, http.StatusConflict)
	rb, err := f.admin.Rollback(ctx, "demo", id2)
	if err != nil {
		t.Fatal(err)
	}
	if rb.From != id2 || rb.To != id1 || !rb.Rollback {
		t.Errorf("rollback = %+v", rb)
	}
	hist, err := f.admin.History(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 || hist[0].To != id1 || hist[1].To != id2 || hist[2].To != id1 {
		t.Errorf("history = %+v", hist)
	}
	rels, err := f.admin.Releases(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(rels) != 2 || rels[0].ID != id1 || rels[1].ID != id2 || rels[1].Parent != id1 {
		t.Errorf("releases = %+v", rels)
	}
	if one, err := f.admin.Release(ctx, "demo", id2); err != nil || one.ID != id2 {
		t.Errorf("release = %+v, %v", one, err)
	}

	// Repository management.
	if r, err = f.admin.AddHostnames(ctx, "demo", "deb.example.test"); err != nil || len(r.Hostnames) != 3 {
		t.Errorf("add hostnames: %+v, %v", r, err)
	}
	if r, err = f.admin.AddKey(ctx, "demo", publicKey(t, f.other)); err != nil || len(r.Keys) != 2 {
		t.Errorf("add key: %+v, %v", r, err)
	}
	if r, err = f.admin.RemoveKey(ctx, "demo", f.other.Fingerprint()); err != nil || len(r.Keys) != 1 {
		t.Errorf("remove key: %+v, %v", r, err)
	}
	if r, err = f.admin.SetRetention(ctx, "demo", 72*time.Hour); err != nil || r.Retention.D() != 72*time.Hour {
		t.Errorf("set retention: %+v, %v", r, err)
	}
	if repos, err := f.admin.Repos(ctx); err != nil || len(repos) != 1 || repos[0].Name != "demo" {
		t.Errorf("repos = %+v, %v", repos, err)
	}
	if got, err := f.admin.Repo(ctx, "demo"); err != nil || got.Active.Release != id1 {
		t.Errorf("repo = %+v, %v", got, err)
	}

	// Routes.
	routes, err := f.admin.Routes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes.Sites) != 1 || routes.Sites[0].Active.ID != id1 || routes.Sites[0].Active.Manifest != sum1 ||
		len(routes.Sites[0].Retained) != 1 || routes.Sites[0].Retained[0].Manifest != sum2 || len(routes.Sites[0].Hostnames) != 3 {
		t.Errorf("routes = %+v", routes)
	}

	// Tokens.
	ci := f.token("ci", []string{"demo"}, "push")
	if _, err := ci.Releases(ctx, "demo"); err != nil {
		t.Errorf("a push token cannot read its repository: %v", err)
	}
	toks, err := f.admin.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 2 || toks[0].Name != "ci" || toks[1].Name != "root" || toks[0].RevokedAt != nil {
		t.Errorf("tokens = %+v", toks)
	}
	revoked, err := f.admin.RevokeToken(ctx, "ci")
	if err != nil || revoked.RevokedAt == nil || revoked.RevokedBy != "root" {
		t.Errorf("revoke = %+v, %v", revoked, err)
	}
	_, err = ci.Releases(ctx, "demo")
	wantStatus(t, err, http.StatusUnauthorized)
}

func TestTokenAPIRawJSON(t *testing.T) {
	f := newFixture(t)
	status, body := f.rawRequest("POST", "/v1/tokens", f.secret, []byte(`{"name":"edge","repositories":["*"],"actions":["read"]}`))
	if status != http.StatusCreated || !strings.Contains(body, `"secret": "armor_`) {
		t.Fatalf("create token: %d %s", status, body)
	}
	if strings.Contains(body, `"hash"`) {
		t.Errorf("the token answer shows the stored hash: %s", body)
	}
}

// TestOwnToken: GET /v1/token answers the caller's own name and scope, never its secret
// or hash, for any valid token, changes nothing, and refuses unknown and revoked tokens;
// the scope it answers allows what controld allows.
func TestOwnToken(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("a")
	tokens := []struct {
		name           string
		repos, actions []string
		may, mayNot    [][2]string // {repository, action}
	}{
		{"edge", []string{"*"}, []string{"read"}, [][2]string{{"a", "read"}, {"z", "read"}}, [][2]string{{"a", "push"}}},
		{"ci-a", []string{"a"}, []string{"push"}, [][2]string{{"a", "push"}, {"a", "read"}}, [][2]string{{"a", "activate"}, {"b", "push"}, {"b", "read"}}},
		{"ops", []string{"a", "b"}, []string{"activate", "push"}, [][2]string{{"b", "activate"}}, [][2]string{{"c", "push"}, {"a", "admin"}}},
	}
	for _, tc := range tokens {
		t.Run(tc.name, func(t *testing.T) {
			out, err := f.admin.CreateToken(ctx, tc.name, tc.repos, tc.actions)
			if err != nil {
				t.Fatal(err)
			}
			before := f.snapshot()
			got, err := f.client(out.Secret).Token(ctx)
			if err != nil {
				t.Fatalf("GET /v1/token: %v", err)
			}
			if got.Name != tc.name || !slices.Equal(got.Repositories, tc.repos) || !slices.Equal(got.Actions, tc.actions) || got.CreatedBy != "root" {
				t.Errorf("GET /v1/token = %+v\nwant name %s, repositories %v, actions %v, created by root", got, tc.name, tc.repos, tc.actions)
			}
			for _, ra := range tc.may {
				if !got.Allows(ra[0], ra[1]) {
					t.Errorf("token %s: Allows(%s, %s) = false, want true", tc.name, ra[0], ra[1])
				}
			}
			for _, ra := range tc.mayNot {
				if got.Allows(ra[0], ra[1]) {
					t.Errorf("token %s: Allows(%s, %s) = true, want false", tc.name, ra[0], ra[1])
				}
			}
			status, body := f.rawRequest("GET", "/v1/token", out.Secret, nil)
			if status != http.StatusOK || strings.Contains(body, out.Secret) || strings.Contains(body, "hash") {
				t.Errorf("GET /v1/token raw: %d %s; want 200 without the secret or its hash", status, body)
			}
			if after := f.snapshot(); after != before {
				t.Errorf("GET /v1/token changed the state:\n%s\n→\n%s", before, after)
			}
		})
	}

	status, _ := f.rawRequest("GET", "/v1/token", "", nil)
	if status != http.StatusUnauthorized {
		t.Errorf("GET /v1/token without a token: %d, want 401", status)
	}
	_, err := f.client("armor_not-a-real-token").Token(ctx)
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("GET /v1/token with an unknown token: %v, want 401", err)
	}
	revoked := f.token("old", []string{"a"}, "push")
	if _, err := f.admin.RevokeToken(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if _, err := revoked.Token(ctx); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("GET /v1/token with a revoked token: %v, want 401", err)
	}
}

func TestStrictRequests(t *testing.T) {
	f := newFixture(t)
	f.repo("demo")
	big := `{"name":"x","hostnames":["` + strings.Repeat("a", 2<<20) + `"]}`
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"unknown field", "POST", "/v1/repos", `{"name":"a","hostname":["x"]}`, 400, `unknown field \"hostname\"`},
		{"wrong type", "POST", "/v1/repos", `{"name":7}`, 400, "name"},
		{"trailing data", "POST", "/v1/repos", `{"name":"a"} {}`, 400, "after the JSON object"},
		{"empty body", "POST", "/v1/repos", ``, 400, "empty"},
		{"too large", "POST", "/v1/repos", big, 413, "over 1048576 bytes"},
		{"bad repository name", "POST", "/v1/repos", `{"name":"Bad Name"}`, 400, "repository name"},
		{"bad hostname", "POST", "/v1/repos", `{"name":"b","hostnames":["a_b.example"]}`, 400, "a_b.example"},
		{"duplicate hostname", "POST", "/v1/repos", `{"name":"b","hostnames":["A.test","a.test."]}`, 400, `\"A.test\" and \"a.test.\"`},
		{"secret key", "POST", "/v1/repos/demo/keys", `{"key":` + quoteJSON(readFile(t, "../testdata/keys/rsa.sec.asc")) + `}`, 400, "secret key"},
		{"garbage key", "POST", "/v1/repos/demo/keys", `{"key":"hello"}`, 400, "key"},
		{"bad manifest digest", "POST", "/v1/repos/demo/releases", `{"manifest":"abc"}`, 400, "sha256"},
		{"expect without activate", "POST", "/v1/repos/demo/releases", `{"manifest":"` + strings.Repeat("a", 64) + `","expect_active":"x"}`, 400, "expect_active"},
		{"bad wait", "GET", "/v1/routes?wait=soon", ``, 400, "wait"},
		{"unknown endpoint", "GET", "/v1/nope", ``, 404, "no endpoint"},
		{"unknown repository", "GET", "/v1/repos/nope", ``, 404, "nope"},
		{"unknown release", "GET", "/v1/repos/demo/releases/" + strings.Repeat("a", 64), ``, 404, "not found"},
		{"unknown action", "POST", "/v1/tokens", `{"name":"x","repositories":["*"],"actions":["fly"]}`, 400, `unknown action \"fly\"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.snapshot()
			status, body := f.rawRequest(tc.method, tc.path, f.secret, []byte(tc.body))
			if status != tc.status || !strings.Contains(body, tc.want) || !strings.Contains(body, `"error"`) {
				t.Errorf("got %d %s\nwant %d with %q", status, body, tc.status, tc.want)
			}
			if after := f.snapshot(); after != before {
				t.Errorf("state changed:\n%s\n→\n%s", before, after)
			}
		})
	}
}

func TestSecurity(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("a")
	f.repo("b")
	idA, sumA := f.release("a", "", "1.0")
	if _, err := f.admin.RecordRelease(ctx, "a", sumA, true, ""); err != nil {
		t.Fatal(err)
	}
	_, sumB := f.release("b", "", "1.0")
	_, sumA2 := f.release("a", idA, "2.0")

	pushA := f.token("push-a", []string{"a"}, "push")
	adminA := f.token("admin-a", []string{"a"}, "admin")
	readAll := f.token("edge", []string{"*"}, "read")
	revoked := f.token("old", []string{"*"}, "admin", "push", "activate")
	if _, err := f.admin.RevokeToken(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	anonymous := f.client("")
	bogus := f.client("armor_not-a-real-token")

	tests := []struct {
		name   string
		do     func() error
		status int
	}{
		{"no token", func() error { _, err := anonymous.Repos(ctx); return err }, 401},
		{"unknown token", func() error { _, err := bogus.Status(ctx, "a"); return err }, 401},
		{"revoked token", func() error { _, err := revoked.RecordRelease(ctx, "a", sumA2, false, ""); return err }, 401},
		{"cross-repository push", func() error { _, err := pushA.RecordRelease(ctx, "b", sumB, false, ""); return err }, 403},
		{"cross-repository read", func() error { _, err := pushA.Releases(ctx, "b"); return err }, 403},
		{"cross-repository admin", func() error { _, err := adminA.AddHostnames(ctx, "b", "x.test"); return err }, 403},
		{"push may not activate", func() error { _, err := pushA.Activate(ctx, "a", idA, idA); return err }, 403},
		{"push may not record+activate", func() error { _, err := pushA.RecordRelease(ctx, "a", sumA2, true, idA); return err }, 403},
		{"push may not roll back", func() error { _, err := pushA.Rollback(ctx, "a", idA); return err }, 403},
		{"read may not push", func() error { _, err := readAll.RecordRelease(ctx, "a", sumA2, false, ""); return err }, 403},
		{"read may not create tokens", func() error {
			_, err := readAll.CreateToken(ctx, "x", []string{"*"}, []string{"admin"})
			return err
		}, 403},
		{"read may not create repositories", func() error {
			_, err := readAll.CreateRepo(ctx, api.CreateRepoRequest{Name: "c"})
			return err
		}, 403},
		{"scoped admin may not create other repositories", func() error {
			_, err := adminA.CreateRepo(ctx, api.CreateRepoRequest{Name: "c"})
			return err
		}, 403},
		{"scoped admin may not mint wider tokens", func() error {
			_, err := adminA.CreateToken(ctx, "wide", []string{"*"}, []string{"push"})
			return err
		}, 403},
		{"scoped admin may not mint tokens for b", func() error {
			_, err := adminA.CreateToken(ctx, "wide", []string{"a", "b"}, []string{"push"})
			return err
		}, 403},
		{"scoped admin may not revoke the edge token", func() error { _, err := adminA.RevokeToken(ctx, "edge"); return err }, 403},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.snapshot()
			err := tc.do()
			wantStatus(t, err, tc.status)
			sentinel := map[int]error{401: client.ErrUnauthorized, 403: client.ErrForbidden}[tc.status]
			if !errors.Is(err, sentinel) {
				t.Errorf("errors.Is(%v, %v) is false", err, sentinel)
			}
			if after := f.snapshot(); after != before {
				t.Errorf("state changed:\n%s\n→\n%s", before, after)
			}
		})
	}

	// What scoped tokens may do, they can.
	if _, err := pushA.RecordRelease(ctx, "a", sumA2, false, ""); err != nil {
		t.Errorf("push token on its repository: %v", err)
	}
	if _, err := adminA.AddHostnames(ctx, "a", "a.example.test"); err != nil {
		t.Errorf("admin token on its repository: %v", err)
	}
	if _, err := adminA.CreateToken(ctx, "ci-a", []string{"a"}, []string{"push"}); err != nil {
		t.Errorf("scoped admin minting a token within its scope: %v", err)
	}
	toks, err := adminA.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tok := range toks {
		names = append(names, tok.Name)
	}
	if !slices.Equal(names, []string{"admin-a", "ci-a", "push-a"}) {
		t.Errorf("scoped admin sees tokens %v, want only those within repository a", names)
	}
	repos, err := pushA.Repos(ctx)
	if err != nil || len(repos) != 1 || repos[0].Name != "a" {
		t.Errorf("a token scoped to a lists %+v, %v", repos, err)
	}
	routes, err := pushA.Routes(ctx, 0, 0)
	if err != nil || len(routes.Sites) != 1 || routes.Sites[0].Repository != "a" {
		t.Errorf("a token scoped to a sees routes %+v, %v", routes, err)
	}
}

func TestHostnameConflict(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.repo("a", "apt.example.test")
	f.repo("b", "deb.example.test")
	before := f.snapshot()
	_, err := f.admin.AddHostnames(ctx, "b", "new.example.test", "APT.example.test.")
	apiErr := wantStatus(t, err, http.StatusConflict)
	if !strings.Contains(apiErr.Message, "apt.example.test") || !strings.Contains(apiErr.Message, "repository a") {
		t.Errorf("conflict message %q does not name the hostname and its owner", apiErr.Message)
	}
	_, err = f.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "c", Hostnames: []string{"apt.example.test"}})
	wantStatus(t, err, http.StatusConflict)
	_, err = f.admin.CreateRepo(ctx, api.CreateRepoRequest{Name: "a"})
	wantStatus(t, err, http.StatusConflict)
	if after := f.snapshot(); after != before {
		t.Errorf("state changed:\n%s\n→\n%s", before, after)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := readAll(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
