package aptsources

import "testing"

func TestEntry(t *testing.T) {
	got := Entry("http://apt.example.org/", KeyringPath("acme"), []Suite{
		{Name: "bookworm", Components: []string{"main", "contrib"}},
		{Name: "bookworm", Components: []string{"main", "contrib"}},
		{Name: "trixie", Components: []string{"main", "contrib"}},
		{Name: "sid", Components: []string{"main"}, Source: true},
		{Name: "empty"},
	})
	want := `Types: deb
URIs: http://apt.example.org/
Suites: bookworm trixie
Components: main contrib
Signed-By: /usr/share/keyrings/acme-archive-keyring.gpg

Types: deb deb-src
URIs: http://apt.example.org/
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/acme-archive-keyring.gpg
`
	if got != want {
		t.Errorf("Entry:\n%s\nwant:\n%s", got, want)
	}
	if u := URI("apt.example.org", true); u != "https://apt.example.org/" {
		t.Errorf("URI with TLS: %s", u)
	}
}
