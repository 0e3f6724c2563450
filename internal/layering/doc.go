// Package layering holds no code: its test checks the import rules that keep armor's
// floor plan readable (docs/design.md, "The parts"), so they are enforced by `make test` rather
// than remembered. The rules are written once, in rules, as data.
package layering
