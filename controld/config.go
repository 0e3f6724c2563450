package controld

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/armor-apt/armor/internal/duration"
	"github.com/armor-apt/armor/internal/tomlfile"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state/postgres"
)

// Defaults of Config.
const (
	DefaultListen           = "127.0.0.1:7380"
	DefaultMaxBody          = 1 << 20   // 1 MiB of JSON per request
	DefaultMaxManifest      = 512 << 20 // a manifest of a very large repository
	DefaultStoreConcurrency = 32
	DefaultShutdownTimeout  = 10 * time.Second
)

// Config configures controld. LoadConfig reads it from TOML; the CLI may then override
// fields from flags. Zero fields take their defaults.
type Config struct {
	// Listen is the TCP address of the API (default 127.0.0.1:7380).
	Listen string `toml:"listen"`
	// DataDir holds the state database (controld.db). Run requires it unless Database
	// is set.
	DataDir string `toml:"data_dir"`
	// Database, a postgres:// URL, keeps the state in PostgreSQL instead of bbolt under
	// DataDir: several controld replicas may then share it. Keep the password out of
	// the file: PGPASSWORD or ~/.pgpass supply it.
	Database string `toml:"database"`
	// Store is the object store as an rclone remote: a local path, "s3:bucket/prefix",
	// a connection string, or a remote from rclone.conf. Required by Run.
	Store string `toml:"store"`
	// TLSCert and TLSKey, both set, make the API serve HTTPS.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// Retention is the retention window of new repositories (default 48h).
	Retention duration.Duration `toml:"retention"`
	// MaxBody limits a request body in bytes (default 1 MiB). Manifests are not posted:
	// controld reads them from the store.
	MaxBody int64 `toml:"max_body"`
	// MaxManifest limits the size of a manifest object read from the store (default
	// 512 MiB).
	MaxManifest int64 `toml:"max_manifest"`
	// StoreConcurrency bounds the parallel object checks of one recording (default 32).
	StoreConcurrency int `toml:"store_concurrency"`
	// IndexCacheEntries bounds what controld keeps in memory of the indexes it read, in
	// stanzas (16 bytes each; default 2,097,152, about 32 MiB). An index it keeps is not
	// read again when a release shares it, and a changed one is read only where it
	// changed; one it no longer keeps is read whole.
	IndexCacheEntries int `toml:"index_cache_entries"`
	// ShutdownTimeout bounds the graceful shutdown (default 10s).
	ShutdownTimeout duration.Duration `toml:"shutdown_timeout"`

	// GCInterval runs the garbage collector this often (see gc.go). The default, 0,
	// never runs it on its own: deleting is opted into, with "24h" for daily; armor gc
	// runs it on demand either way.
	GCInterval duration.Duration `toml:"gc_interval"`
	// GCGrace spares objects younger than this (default 24h): a push uploads its
	// objects before it records its release, and must never find them collected.
	GCGrace duration.Duration `toml:"gc_grace"`
	// GCKeepLast keeps the releases last active in each repository, the active one
	// counted (default 3), so there is more than one release to go back to.
	GCKeepLast int `toml:"gc_keep_last"`
	// GCKeepDrafts keeps a release recorded but never activated this long after its
	// push (default 168h), so one pushed for later activation is still there.
	GCKeepDrafts duration.Duration `toml:"gc_keep_drafts"`

	// Hooks tunes the delivery of webhooks.
	Hooks HooksConfig `toml:"hooks"`

	// Now is the clock (default time.Now); tests inject their own.
	Now func() time.Time `toml:"-"`
	// Logger receives request and error logs (default: discarded). Run sets it.
	Logger *slog.Logger `toml:"-"`
}

// HooksConfig tunes the delivery of webhooks (package controld/hooks); zero fields take
// its defaults.
type HooksConfig struct {
	// Timeout bounds one attempt, from connecting to the receiver's answer (10s).
	Timeout duration.Duration `toml:"timeout"`
	// MaxAttempts is how many times a delivery is tried before it is failed (12).
	MaxAttempts int `toml:"max_attempts"`
	// BackoffMin is the wait after a first failure; it doubles with each failure up to
	// BackoffMax (10s and 1h: 12 attempts span about three hours).
	BackoffMin duration.Duration `toml:"backoff_min"`
	BackoffMax duration.Duration `toml:"backoff_max"`
	// Keep is how long the log keeps finished deliveries (720h).
	Keep duration.Duration `toml:"keep"`
}

// LoadConfig reads a Config from a TOML file strictly: an unknown key or a wrong type is
// an error naming the file and line. Defaults are applied.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read controld config: %w", err)
	}
	return ParseConfig(data, path)
}

// ParseConfig is LoadConfig on bytes; name labels errors.
func ParseConfig(data []byte, name string) (Config, error) {
	var cfg Config
	if err := tomlfile.Decode(data, "controld config "+name, &cfg); err != nil {
		return Config{}, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return Config{}, fmt.Errorf("controld config %s: %w", name, err)
	}
	return cfg, nil
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Retention.D() == 0 {
		c.Retention = duration.Duration(api.DefaultRetention)
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxManifest == 0 {
		c.MaxManifest = DefaultMaxManifest
	}
	if c.StoreConcurrency == 0 {
		c.StoreConcurrency = DefaultStoreConcurrency
	}
	if c.ShutdownTimeout.D() == 0 {
		c.ShutdownTimeout = duration.Duration(DefaultShutdownTimeout)
	}
	if c.IndexCacheEntries == 0 {
		c.IndexCacheEntries = DefaultIndexCacheEntries
	}
	if c.GCGrace.D() == 0 {
		c.GCGrace = duration.Duration(DefaultGCGrace)
	}
	if c.GCKeepLast == 0 {
		c.GCKeepLast = DefaultGCKeepLast
	}
	if c.GCKeepDrafts.D() == 0 {
		c.GCKeepDrafts = duration.Duration(DefaultGCKeepDrafts)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// check validates values that have no sensible default.
func (c Config) check() error {
	switch {
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return errors.New("tls_cert and tls_key must be set together")
	case c.Retention.D() < 0:
		return fmt.Errorf("retention %v is negative", c.Retention)
	case c.MaxBody < 0 || c.MaxManifest < 0:
		return errors.New("max_body and max_manifest must be positive")
	case c.StoreConcurrency < 0:
		return errors.New("store_concurrency must be positive")
	case c.GCInterval.D() < 0 || c.GCGrace.D() < 0 || c.GCKeepDrafts.D() < 0:
		return errors.New("gc_interval, gc_grace and gc_keep_drafts must not be negative")
	case c.GCKeepLast < 0:
		return errors.New("gc_keep_last must not be negative")
	case c.Hooks.Timeout.D() < 0 || c.Hooks.BackoffMin.D() < 0 || c.Hooks.BackoffMax.D() < 0 || c.Hooks.Keep.D() < 0 || c.Hooks.MaxAttempts < 0:
		return errors.New("hooks: timeout, max_attempts, backoff_min, backoff_max and keep must not be negative")
	case c.Database != "" && !postgres.IsURL(c.Database):
		return errors.New("database must be a postgres:// (or postgresql://) URL; leave it out to keep the state in data_dir")
	}
	return nil
}
