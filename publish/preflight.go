package publish

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/armor-apt/armor/controld/api"
	"github.com/armor-apt/armor/controld/client"
)

// What a Preflight found wrong, matched with errors.Is; the error itself says where and
// what to do.
var (
	// ErrControldUnreachable: controld did not answer (refused, timed out, not HTTP), or
	// answered as something that is not a controld with GET /v1/token.
	ErrControldUnreachable = errors.New("controld unreachable")
	// ErrTokenRefused: there is no token, or controld does not know it or revoked it.
	ErrTokenRefused = errors.New("token refused")
	// ErrTokenScope: the token may not push to the repository, or not activate there.
	ErrTokenScope = errors.New("token not allowed")
	// ErrUnknownRepository: controld has no such repository.
	ErrUnknownRepository = errors.New("unknown repository")
)

// Preflight checks, changing nothing, that a push recorded in controld as o says would
// be accepted as far as can be known before anything is uploaded: controld at o.URL
// answers, knows the client's token (GET /v1/token), the token may push to o.Repo (and
// activate there, with o.Activate), and the repository exists. It returns the token.
//
// Its errors name controld, the token (by o.TokenSource and by name) and the repository,
// say what to do, and match ErrControldUnreachable, ErrTokenRefused, ErrTokenScope or
// ErrUnknownRepository; a lost connection or an unexpected answer is wrapped as well.
func Preflight(ctx context.Context, c *client.Client, o *Controld) (*api.Token, error) {
	tok, err := c.Token(ctx)
	if err != nil {
		return nil, o.tokenError(ctx, err)
	}
	need := []string{api.ActionPush}
	if o.Activate {
		need = append(need, api.ActionActivate)
	}
	if !api.Covers(tok.Repositories, o.Repo) {
		return nil, &PreflightError{Kind: ErrTokenScope, Msg: fmt.Sprintf(
			"controld %s: token %s%s may not push to repository %s: it is scoped to %s: use a token for %s with %s (armor tokens create NAME --for %s %s)",
			o.URL, tok.Name, o.from(), o.Repo, strings.Join(tok.Repositories, ", "), o.Repo, strings.Join(need, " and "),
			o.Repo, actionFlags(need))}
	}
	for _, a := range need {
		if tok.Allows(o.Repo, a) {
			continue
		}
		hint := ""
		if a == api.ActionActivate {
			hint = ", or push with --no-activate to record the release without activating it"
		}
		return nil, &PreflightError{Kind: ErrTokenScope, Msg: fmt.Sprintf(
			"controld %s: token %s%s may not %s on repository %s (it may %s): use a token with %s (armor tokens create NAME --for %s %s)%s",
			o.URL, tok.Name, o.from(), a, o.Repo, strings.Join(tok.Actions, ", "), strings.Join(need, " and "),
			o.Repo, actionFlags(need), hint)}
	}
	if _, err := c.Repo(ctx, o.Repo); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		if errors.Is(err, client.ErrNotFound) {
			return nil, &PreflightError{Kind: ErrUnknownRepository, Err: err, Msg: fmt.Sprintf(
				"controld %s has no repository %s: create it (armor repos create, with an admin token) or fix [repository] name in armor.toml",
				o.URL, o.Repo)}
		}
		return nil, fmt.Errorf("controld %s: look up repository %s: %w", o.URL, o.Repo, err)
	}
	return tok, nil
}

// tokenError says what GET /v1/token failing means.
func (o *Controld) tokenError(ctx context.Context, err error) error {
	var ae *client.APIError
	switch {
	case ctx.Err() != nil:
		return err
	case errors.Is(err, client.ErrUnauthorized):
		return &PreflightError{Kind: ErrTokenRefused, Err: err, Msg: fmt.Sprintf(
			"controld %s refuses the token%s: it is unknown there or revoked: use a token that this controld issued (armor tokens create) and that is not revoked",
			o.URL, o.from())}
	case errors.As(err, &ae) && ae.Status == 404:
		return &PreflightError{Kind: ErrControldUnreachable, Err: err, Msg: fmt.Sprintf(
			"controld %s does not answer GET /v1/token: check that the URL is controld's, and that controld is as new as this armor",
			o.URL)}
	case errors.As(err, &ae):
		return fmt.Errorf("controld %s: check the token: %w", o.URL, err)
	}
	return &PreflightError{Kind: ErrControldUnreachable, Err: err, Msg: fmt.Sprintf(
		"controld %s does not answer: check that controld runs there and that the URL is right", o.URL)}
}

// PreflightError is what Preflight found wrong: Kind is one of its sentinels, Err the
// cause if any (such as controld's answer). Its message is Msg, then Err.
type PreflightError struct {
	Kind error
	Msg  string
	Err  error
}

func (e *PreflightError) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

// Unwrap gives Kind and Err, so errors.Is matches the sentinel and the cause.
func (e *PreflightError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// from names where the token came from, for messages: " (from $ARMOR_TOKEN)".
func (o *Controld) from() string {
	if o.TokenSource == "" {
		return ""
	}
	return " (from " + o.TokenSource + ")"
}

func actionFlags(actions []string) string {
	var b strings.Builder
	for i, a := range actions {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("--action " + a)
	}
	return b.String()
}
