// Package layering holds no code: its tests check the import rules that keep armor's
// floor plan readable (docs/design.md, "The parts"), and the longest a function outside
// tests may grow, so they are enforced by `make test` rather than remembered. The import
// rules are written once, in rules, as data.
package layering
