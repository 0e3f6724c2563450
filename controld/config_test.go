package controld_test

import (
	"strings"
	"testing"
	"time"

	"github.com/armor-apt/armor/controld"
)

func TestExampleConfig(t *testing.T) {
	cfg, err := controld.LoadConfig("../configs/controld.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:7380" || cfg.DataDir != "/var/lib/armor/controld" || cfg.Store != "/srv/armor/store" ||
		cfg.Retention.D() != 48*time.Hour || cfg.MaxBody != 1<<20 || cfg.StoreConcurrency != 32 ||
		cfg.ShutdownTimeout.D() != 10*time.Second || cfg.TLSCert != "" ||
		cfg.GCInterval.D() != 0 || cfg.GCGrace.D() != 24*time.Hour || cfg.GCKeepLast != 3 || cfg.GCKeepDrafts.D() != 7*24*time.Hour {
		t.Errorf("example config = %+v", cfg)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, toml string
		want       string // error substring; "" for success
		check      func(controld.Config) bool
	}{
		{"empty gives defaults", "", "", func(c controld.Config) bool {
			return c.Listen == controld.DefaultListen && c.Retention.D() == 48*time.Hour && c.MaxBody == controld.DefaultMaxBody
		}},
		{"retention", `retention = "72h"`, "", func(c controld.Config) bool { return c.Retention.D() == 72*time.Hour }},
		{"retention in days, as armor.toml writes it", `retention = "7d"`, "", func(c controld.Config) bool { return c.Retention.D() == 7*24*time.Hour }},
		{"unknown key names file and line", "listen = \"x:1\"\nlisten_addr = \"y\"\n", "test.toml: unknown key", nil},
		{"unknown key shows the line", "listen = \"x:1\"\nlisten_addr = \"y\"\n", "2| listen_addr", nil},
		{"wrong type names the line", "listen = \"x:1\"\nmax_body = \"big\"\n", "test.toml:2:", nil},
		{"bad duration", `retention = "two days"`, `"7d", "48h"`, nil},
		{"half of TLS", `tls_cert = "c.pem"`, "tls_cert and tls_key", nil},
		{"negative retention", `retention = "-1h"`, "negative", nil},
		{"gc off by default, with a day of grace", "", "", func(c controld.Config) bool {
			return c.GCInterval.D() == 0 && c.GCGrace.D() == controld.DefaultGCGrace && c.GCKeepLast == controld.DefaultGCKeepLast
		}},
		{"gc settings", "gc_interval = \"24h\"\ngc_grace = \"2h\"\ngc_keep_last = 5\ngc_keep_drafts = \"1d\"", "", func(c controld.Config) bool {
			return c.GCInterval.D() == 24*time.Hour && c.GCGrace.D() == 2*time.Hour && c.GCKeepLast == 5 && c.GCKeepDrafts.D() == 24*time.Hour
		}},
		{"negative gc grace", `gc_grace = "-1h"`, "gc_grace", nil},
		{"negative gc keep", `gc_keep_last = -1`, "gc_keep_last", nil},
		{"postgres database", `database = "postgres://armor@db:5432/armor"`, "", func(c controld.Config) bool { return c.Database == "postgres://armor@db:5432/armor" }},
		{"postgresql scheme", `database = "postgresql:///armor?host=/run/postgresql"`, "", func(c controld.Config) bool { return c.Database != "" }},
		{"database not a postgres URL", `database = "/var/lib/armor/controld.db"`, "database must be a postgres:// (or postgresql://) URL", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := controld.ParseConfig([]byte(tc.toml), "test.toml")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !tc.check(cfg) {
					t.Errorf("config = %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"", `listen = "a:1"`, "retention = \"1h\"\nmax_body = 5", "[x]\ny=1", `store = 7`, `database = "postgres://a@b/c"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := controld.ParseConfig(data, "fuzz.toml")
		if err == nil && (cfg.Listen == "" || cfg.MaxBody <= 0 || cfg.Retention.D() < 0) {
			t.Errorf("accepted config without defaults: %+v", cfg)
		}
	})
}
