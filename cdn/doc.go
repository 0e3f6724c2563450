// Package cdn keeps a CDN in front of armor's edges in step with activations: Purger
// is the receiver of controld's webhooks (activate, rollback, key) that purges, in one
// or more Varnish servers (configs/cdn/varnish.vcl) or a CDN that takes Varnish's PURGE
// method (Fastly), the paths an event changed.
//
// What edged marks immutable (by-hash/ and pool/ paths) is never purged: those URLs
// never change. What an activation changed among the other paths, the directory
// listings above every changed path and the repository page are purged for each of
// the repository's hostnames; a key change purges the keyrings and the page. Before it
// purges, the purger waits (a bounded time) until each edge it knows reports, on its
// /readyz, the routes version that carries the change: a purge that reached the CDN
// before the edges had the new release would let the CDN fetch the old one again. An
// edge that does not answer is out of the pool and not waited for.
// A delivery is answered 2xx only once every purge succeeded, so a failed purge is
// retried by controld. An event whose changed paths were cut (too many to list) before
// pool/ (they are sorted, dists/ first) bans the hostnames' mutable objects instead.
//
// It is written by hand because it is glue between two protocols armor defines
// (controld's signed webhooks, edged's /readyz) and Varnish's PURGE and BAN methods.
package cdn
