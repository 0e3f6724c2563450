package controld

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/state"
	"github.com/armor-apt/armor/controld/state/bolt"
)

// DBFile is the state database's name inside the data directory.
const DBFile = "controld.db"

// tokenPrefix starts every secret, so a leaked one is easy to recognise and scan for.
const tokenPrefix = "armor_"

var (
	repoNameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`)
)

func checkRepoName(name string) error {
	if !repoNameRE.MatchString(name) {
		return badRequest("repository name %q: use 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// hashToken returns the stored form of a secret: hex SHA-256. Secrets carry 256 random
// bits, so a fast hash is enough; there is nothing to brute-force.
func hashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// newSecret returns a fresh random token secret.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// checkScope validates a token's name, repositories and actions and returns them
// normalised (sorted, without duplicates).
func checkScope(name string, repos, actions []string) ([]string, []string, error) {
	if !tokenNameRE.MatchString(name) {
		return nil, nil, badRequest("token name %q: use 1-128 letters, digits, '.', '_', '@' or '-'", name)
	}
	repos, err := checkRepositories("token "+name, repos)
	if err != nil {
		return nil, nil, err
	}
	if len(actions) == 0 {
		return nil, nil, badRequest("token %s: name at least one action of %s", name, strings.Join(api.Actions, ", "))
	}
	for _, a := range actions {
		if !slices.Contains(api.Actions, a) {
			return nil, nil, badRequest("token %s: unknown action %q (want %s)", name, a, strings.Join(api.Actions, ", "))
		}
	}
	actions = slices.Clone(actions)
	slices.Sort(actions)
	return repos, slices.Compact(actions), nil
}

// checkRepositories validates the repositories of a scope (a token's, a hook's: what
// names it in messages): names, or "*" alone. It returns them sorted, without
// duplicates.
func checkRepositories(what string, repos []string) ([]string, error) {
	if len(repos) == 0 {
		return nil, badRequest("%s: name at least one repository, or \"*\" for all", what)
	}
	for _, r := range repos {
		if r == api.AllRepositories {
			if len(repos) > 1 {
				return nil, badRequest("%s: \"*\" already covers every repository; list it alone", what)
			}
			continue
		}
		if err := checkRepoName(r); err != nil {
			return nil, err
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(repos))), nil
}

// makeToken creates a token record and its secret.
func makeToken(name string, repos, actions []string, by string, at time.Time) (state.Token, string, error) {
	repos, actions, err := checkScope(name, repos, actions)
	if err != nil {
		return state.Token{}, "", err
	}
	secret, err := newSecret()
	if err != nil {
		return state.Token{}, "", err
	}
	return state.Token{
		Name: name, Hash: hashToken(secret), Repositories: repos, Actions: actions,
		CreatedAt: at.UTC(), CreatedBy: by,
	}, secret, nil
}

// CreateToken creates a token directly in the state database under dataDir, with no
// daemon running (the database is locked while controld runs: then use the API). It is
// how the first admin token is made. repositories are names or "*"; actions are read,
// push, activate and admin. It returns the secret, which is stored only as a hash.
func CreateToken(dataDir, name string, repositories, actions []string) (string, error) {
	return CreateTokenIn(context.Background(), "", dataDir, name, repositories, actions)
}

// CreateTokenIn is CreateToken in the state that OpenState(database, dataDir) opens: with
// a PostgreSQL database, controld replicas may be running meanwhile.
func CreateTokenIn(ctx context.Context, database, dataDir, name string, repositories, actions []string) (string, error) {
	tok, secret, err := makeToken(name, repositories, actions, "offline", time.Now())
	if err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	st, err := OpenState(ctx, database, dataDir)
	if err != nil {
		if errors.Is(err, bolt.ErrLocked) {
			return "", fmt.Errorf("create token: %w (controld is running: create the token through the API)", err)
		}
		return "", fmt.Errorf("create token: %w", err)
	}
	defer st.Close()
	if err := st.CreateToken(ctx, tok); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	if err := st.Close(); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	return secret, nil
}

// authenticate resolves the bearer token of a request: missing, unknown and revoked
// tokens are all 401.
func (s *Server) authenticate(c *call) error {
	h := c.r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return errUnauthorized
	}
	tok, err := s.st.TokenByHash(c.ctx(), hashToken(strings.TrimSpace(secret)))
	switch {
	case errors.Is(err, state.ErrNotFound):
		return errUnauthorized
	case err != nil:
		return fmt.Errorf("look up token: %w", err)
	case tok.Revoked():
		return errUnauthorized
	}
	c.tok = tok
	return nil
}

// can reports whether the token may do action on repo. Any action implies read.
func (c *call) can(repo, action string) bool {
	return api.Allows(c.tok.Repositories, c.tok.Actions, repo, action)
}

// allow is can as an error: 403 naming what is missing.
func (c *call) allow(repo, action string) error {
	if !api.Covers(c.tok.Repositories, repo) {
		return forbidden("token %s is not scoped to repository %s", c.tok.Name, repo)
	}
	if !c.can(repo, action) {
		return forbidden("token %s may not %s (it may %s)", c.tok.Name, action, strings.Join(c.tok.Actions, ", "))
	}
	return nil
}

// within reports whether every repository of scope is covered by the caller's token.
func (c *call) within(scope []string) bool {
	if slices.Contains(c.tok.Repositories, api.AllRepositories) {
		return true
	}
	for _, r := range scope {
		if r == api.AllRepositories || !slices.Contains(c.tok.Repositories, r) {
			return false
		}
	}
	return true
}

// isAdmin reports whether the token has the admin action at all.
func (c *call) isAdmin() bool { return slices.Contains(c.tok.Actions, api.ActionAdmin) }
