package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/armor-apt/armor/cdn"
)

// HookSecretEnv holds the hook's secret for armor cdn purger when no --secret-file is
// given.
const HookSecretEnv = "ARMOR_HOOK_SECRET"

// CDNCmd groups the CDN helpers.
type CDNCmd struct {
	Purger CDNPurgerCmd `cmd:"" help:"Receive controld's webhooks and purge, in Varnish (or Fastly), what each activation changed (configs/cdn/)."`
}

// CDNPurgerCmd runs the purger.
type CDNPurgerCmd struct {
	Listen     string        `help:"Address the webhooks are POSTed to." default:"127.0.0.1:9180"`
	PurgeURL   []string      `name:"purge-url" help:"Where purges go (repeatable): a Varnish server's base URL (http://127.0.0.1:6081), or https://{host} to send each to the hostname itself (Fastly)." required:""`
	HeaderEnv  []string      `name:"purge-header-env" help:"NAME=VAR: send header NAME with the value of $VAR on every purge, e.g. Fastly-Key=FASTLY_API_TOKEN (repeatable)."`
	Edge       []string      `help:"Admin URL of an edge (http://edge-1:9090), whose /readyz is waited on before purging (repeatable)."`
	Wait       time.Duration `help:"How long to wait for the edges to serve the change before purging anyway." default:"30s"`
	SecretFile string        `name:"secret-file" help:"File holding the secret armor hooks add printed (default: $ARMOR_HOOK_SECRET)." type:"existingfile"`
	LogFormat  string        `help:"Log format: text or json." default:"text" enum:"text,json"`
}

// Help says how it fits together.
func (c *CDNPurgerCmd) Help() string {
	return `Register it with controld as a webhook of activations, rollbacks and key changes, then run it with the secret that printed:

  armor hooks add http://127.0.0.1:9180/ --event activate --event rollback --event key --for '*' > purger.secret
  armor cdn purger --purge-url http://127.0.0.1:6081 --edge http://edge-1:9090 --edge http://edge-2:9090 --secret-file purger.secret

It checks each delivery's signature, waits until the edges serve the change, then sends a PURGE of every mutable path the event changed (by-hash/ and pool/ never change), of the directory listings above them and of the repository page, for each of the repository's hostnames; a BAN of the hostname's mutable objects when the list was cut before its end. It answers 2xx only after every purge succeeded, so controld retries a failed one. configs/cdn/varnish.vcl accepts PURGE and BAN from the purger's address; for Fastly, --purge-url https://{host} --purge-header-env Fastly-Key=FASTLY_API_TOKEN (configs/cdn/README.md).`
}

// Run serves until SIGINT or SIGTERM.
func (c *CDNPurgerCmd) Run(g *Globals) error {
	secret, err := hookSecret(c.SecretFile)
	if err != nil {
		return err
	}
	logger := newLogger(g, c.LogFormat)
	headers, err := envHeaders(c.HeaderEnv)
	if err != nil {
		return err
	}
	p, err := cdn.New(cdn.Config{Secret: secret, Targets: c.PurgeURL, Headers: headers, Edges: c.Edge, Wait: c.Wait, Logger: logger})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("cdn purger: listen: %w", err)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("cdn purger listening", "addr", ln.Addr().String(), "purge_urls", c.PurgeURL, "edges", c.Edge)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("cdn purger: %w", err)
	case <-g.ctx.Done():
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Wait+10*time.Second)
	defer cancel()
	err = srv.Shutdown(ctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// envHeaders reads NAME=VAR pairs into headers whose values come from the environment
// (secrets never go in flags).
func envHeaders(pairs []string) (http.Header, error) {
	h := http.Header{}
	for _, p := range pairs {
		name, env, ok := strings.Cut(p, "=")
		if !ok || name == "" || env == "" {
			return nil, fmt.Errorf("--purge-header-env %q: want NAME=VAR", p)
		}
		v := os.Getenv(env)
		if v == "" {
			return nil, fmt.Errorf("--purge-header-env %s: $%s is empty", p, env)
		}
		h.Add(name, v)
	}
	return h, nil
}

// hookSecret reads a hook's secret from file, else from $ARMOR_HOOK_SECRET.
func hookSecret(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read the hook secret: %w", err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
		return "", fmt.Errorf("the hook secret file %s is empty", file)
	}
	if s := strings.TrimSpace(os.Getenv(HookSecretEnv)); s != "" {
		return s, nil
	}
	return "", fmt.Errorf("no hook secret: give --secret-file (the secret armor hooks add printed) or set $%s", HookSecretEnv)
}
