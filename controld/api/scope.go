package api

import "slices"

// Covers reports whether a token scoped to repositories includes repo.
func Covers(repositories []string, repo string) bool {
	return slices.Contains(repositories, AllRepositories) || slices.Contains(repositories, repo)
}

// Allows reports whether a token scoped to repositories with actions may do action on
// repo. It is the rule controld enforces, so a client holding its own Token (GET
// /v1/token) can tell what it may do without trying: any action implies read.
func Allows(repositories, actions []string, repo, action string) bool {
	if !Covers(repositories, repo) {
		return false
	}
	return action == ActionRead && len(actions) > 0 || slices.Contains(actions, action)
}

// Allows reports whether the token may do action on repo (see the function Allows).
func (t Token) Allows(repo, action string) bool {
	return Allows(t.Repositories, t.Actions, repo, action)
}
