package edged

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExampleConfig(t *testing.T) {
	cfg, err := LoadConfig("../configs/edged.toml")
	if err != nil {
		t.Fatalf("configs/edged.toml: %v", err)
	}
	want := Defaults()
	want.Controld = "http://127.0.0.1:7380" // controld.toml's listen
	want.Store = "/srv/armor/store"
	if cfg != want {
		t.Fatalf("configs/edged.toml gives\n%+v\nwant the defaults it documents\n%+v", cfg, want)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, text string
		check      func(Config) bool
		err        string // substring of the error; "" for success
	}{
		{"minimal", `controld = "http://c:1"`, func(c Config) bool {
			return c.Listen == "127.0.0.1:8080" && c.AdminListen == "127.0.0.1:9090" && c.CacheSize == 512*MiB && c.Poll.Wait.D() == 30*time.Second && c.ConnPoller == "go"
		}, ""},
		{"sizes", "controld = \"http://c:1\"\ncache_size = \"1GiB\"\nstream_threshold = 1048576", func(c Config) bool {
			return c.CacheSize == GiB && c.StreamThreshold == MiB
		}, ""},
		{"unknown key names the line", "controld = \"http://c:1\"\n\ncach_size = \"1GiB\"", nil, "cach_size"},
		{"unknown poll key", "controld = \"http://c:1\"\n[poll]\nwaiting = \"1s\"", nil, "waiting"},
		{"bad size names file and line", "controld = \"http://c:1\"\ncache_size = \"lots\"", nil, "edged.toml:2"},
		{"bad duration", "controld = \"http://c:1\"\n[poll]\nwait = \"soon\"", nil, "edged.toml:3"},
		{"token is not a key", "controld = \"http://c:1\"\ntoken = \"s3cret\"", nil, "token"},
		{"controld required", `listen = ":1"`, nil, "controld"},
		{"controld must be http", `controld = "ftp://c"`, nil, "controld"},
		{"threshold over cache", "controld = \"http://c:1\"\ncache_size = \"1MiB\"\nstream_threshold = \"2MiB\"", nil, "stream_threshold"},
		{"wait over 60s", "controld = \"http://c:1\"\n[poll]\nwait = \"90s\"", nil, "poll.wait"},
		{"edged's poller", "controld = \"http://c:1\"\nconn_poller = \"edged\"", func(c Config) bool { return c.ConnPoller == "edged" }, ""},
		{"unknown poller", "controld = \"http://c:1\"\nconn_poller = \"io_uring\"", nil, "conn_poller"},
		{"https off by default", `controld = "http://c:1"`, func(c Config) bool { return c.TLSListen == "" && c.ACMECA == DefaultACMECA }, ""},
		{"https with a private CA", "controld = \"http://c:1\"\ntls_listen = \":443\"\nacme_ca = \"https://ca.test/dir\"\nacme_email = \"ops@example.org\"\nacme_ca_root = \"/etc/ca.pem\"", func(c Config) bool {
			return c.TLSListen == ":443" && c.ACMECA == "https://ca.test/dir" && c.ACMEEmail == "ops@example.org" && c.ACMECARoot == "/etc/ca.pem"
		}, ""},
		{"https needs state_dir", "controld = \"http://c:1\"\ntls_listen = \":443\"\nstate_dir = \"\"", nil, "state_dir"},
		{"acme_ca must be https", "controld = \"http://c:1\"\ntls_listen = \":443\"\nacme_ca = \"http://ca.test/dir\"", nil, "acme_ca"},
		{"acme_email must be an address", "controld = \"http://c:1\"\ntls_listen = \":443\"\nacme_email = \"Ops <ops@example.org>\"", nil, "acme_email"},
		{"one challenge", "controld = \"http://c:1\"\ntls_listen = \":443\"\nacme_challenge = \"tls-alpn-01\"", func(c Config) bool { return c.ACMEChallenge == ChallengeTLSALPN01 }, ""},
		{"unknown challenge", "controld = \"http://c:1\"\ntls_listen = \":443\"\nacme_challenge = \"dns-01\"", nil, "acme_challenge"},
		{"backoff inverted", "controld = \"http://c:1\"\n[poll]\nbackoff_min = \"1m\"\nbackoff_max = \"1s\"", nil, "backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "edged.toml")
			if err := os.WriteFile(path, []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v; want one naming %s and %q", err, path, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		bad  bool
	}{
		{"512MiB", 512 * MiB, false},
		{"8 MiB", 8 * MiB, false},
		{"1.5GiB", 3 * GiB / 2, false},
		{"64k", 64 * KiB, false},
		{"1GB", 1e9, false},
		{"4096", 4096, false},
		{"", 0, true},
		{"-1MiB", 0, true},
		{"MiB", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d (error %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}
