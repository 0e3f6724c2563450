package cli

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/armor-apt/armor/gen"
)

// VerifyCmd checks a tree.
type VerifyCmd struct {
	Tree    string   `arg:"" help:"Tree directory, or base URL of a repository (http://host/path/)."`
	Keyring []string `help:"Public key file(s), armored or binary." required:"" type:"existingfile"`
	Suite   []string `help:"Suite codename(s) to check (default for a directory: every dists/*/InRelease; required for a URL)."`
	Pool    bool     `help:"Also check every pool file the Packages indexes list."`
}

// Run verifies.
func (c *VerifyCmd) Run(g *Globals) error {
	var keyrings [][]byte
	for _, k := range c.Keyring {
		data, err := os.ReadFile(k)
		if err != nil {
			return fmt.Errorf("read keyring: %w", err)
		}
		keyrings = append(keyrings, data)
	}
	var f gen.Fetcher
	suites := c.Suite
	if strings.HasPrefix(c.Tree, "http://") || strings.HasPrefix(c.Tree, "https://") {
		if len(suites) == 0 {
			return &exitError{exitUsage, fmt.Errorf("verify %s: name the suites to check with --suite (a URL cannot be listed)", c.Tree)}
		}
		f = httpFetcher{base: strings.TrimSuffix(c.Tree, "/") + "/", client: &http.Client{Timeout: 60 * time.Second}}
	} else {
		f = dirFetcher(c.Tree)
		if len(suites) == 0 {
			found, err := filepath.Glob(filepath.Join(c.Tree, "dists", "*", "InRelease"))
			if err != nil {
				return err
			}
			for _, p := range found {
				suites = append(suites, filepath.Base(filepath.Dir(p)))
			}
			sort.Strings(suites)
			if len(suites) == 0 {
				return fmt.Errorf("verify %s: no dists/*/InRelease found", c.Tree)
			}
		}
	}
	rep, err := gen.VerifyTree(g.ctx, f, gen.VerifyOptions{Suites: suites, Keyrings: keyrings, Pool: c.Pool})
	if g.JSON {
		if rep.Problems == nil {
			rep.Problems = []string{}
		}
		if jerr := printJSON(g.stdout, rep); jerr != nil {
			return jerr
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintf(g.stdout, "FAIL %s\n", p)
		}
		if err == nil {
			fmt.Fprintf(g.stdout, "ok: %d suite(s), %d index file(s), %d pool file(s) verified\n", rep.Suites, rep.Indexes, rep.PoolFiles)
		}
	}
	return err
}

type dirFetcher string

func (d dirFetcher) Open(_ context.Context, p string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(string(d), filepath.FromSlash(p)))
}

type httpFetcher struct {
	base   string
	client *http.Client
}

func (h httpFetcher) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+p, nil)
	if err != nil {
		return nil, err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: 404: %w", h.base+p, fs.ErrNotExist)
	case resp.StatusCode != http.StatusOK:
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", h.base+p, resp.Status)
	}
	return resp.Body, nil
}
