// Package edged is armor's edge server: what apt clients and mirrors talk to.
//
// An Edge pulls the route feed from controld (long poll, read-only token), reads each
// routed release's manifest from the object store, and serves every hostname its
// repository's tree over fasthttp from a ristretto cache of objects keyed by SHA-256.
//
// Use: New(cfg, store, logger) creates an Edge (loading routes kept on disk); Sync
// keeps its routes in step with controld; Serve and ServeAdmin serve the public and
// admin listeners; EnableACME and ServeTLS add HTTPS with certificates by ACME for the
// routed hostnames only (tls.go); Run does all of that from a Config (opening the store
// with store.OpenRclone). Close releases the cache once they have returned.
//
// Guarantees:
//   - A site's whole path map is swapped at once (an atomic pointer to an immutable
//     routing table), after the new release's index files are pre-warmed, so a client
//     sees the old release or the new one, never a mix.
//   - by-hash/ and pool/ paths of releases retained by controld (active within the
//     retention window) stay served until the window ends.
//   - If controld is unreachable the last known routes keep being served; they are kept
//     on disk (the feed and the manifests it names) so a restart needs neither controld
//     nor the store to route. If the store is unreachable, cached objects are still
//     served and misses get 503 with Retry-After. HEAD answers what GET would: for an
//     object not in the cache it asks the store (Stat) whether it can serve it.
//   - /healthz (admin listener) answers 200 {"status":"ok"} only while controld's feed
//     and the store both answer; otherwise 503 with "degraded" (still serving) or "no
//     routes loaded", and the state of each. controld counts as down once polling has
//     failed for longer than poll.stale_after (2 minutes by default). The store is
//     asked, at each request, for the manifest of a routed active release, so a store
//     that answers but moved or was emptied counts as down too.
//   - /readyz (admin listener), the load balancer's check, answers as /healthz does,
//     and 503 "shutting down" from the start of a graceful shutdown: the admin listener
//     outlives the public ones while their requests in flight finish.
//
// HTTP details an operator may care about:
//   - The site is chosen by the Host header (or the host of an absolute-form request
//     target), normalised exactly as hostname.Normalize does: unknown host 404, missing
//     Host 400. The path is percent-decoded and repeated slashes are merged, as nginx's
//     merge_slashes does (debmirror asks for "//dists/..." of a repository at a
//     hostname's root); it must then name a file or a directory of the site's release:
//     ".", ".." and encoded '/' are 400; unknown paths 404.
//   - "/" answers the repository page (page.go): how to add the repository (the
//     deb822 .sources entry for the request's scheme and host, with Signed-By, and the
//     curl command for the key), the keys' fingerprints, suites, components and
//     architectures, the active release and its activation, and the packages linking
//     to their .debs, searchable with /?q= (no JavaScript). It is rendered from the
//     manifest and the feed's keys, kept in the object cache by its SHA-256 (the ETag).
//   - Every other directory of the active release ("/dists/stable/") answers its
//     listing, like nginx's autoindex: HTML with each entry's name, date and size, or
//     nginx's JSON with Accept: application/json (the root's too, with the keyrings).
//     Asked without its trailing slash, it redirects there (301), as nginx does. The
//     directory tree is built once per routing map, not per request; retained
//     releases' paths are served but not listed, so `wget -m -np` mirrors exactly the
//     active release.
//   - /<repository>-archive-keyring.gpg (binary keyring) and .asc (armored) at the root
//     of each hostname are the repository's public keys, as controld's routes feed
//     lists them (a key added or removed changes the feed's version); a file of the
//     release with the same name wins.
//   - GET and HEAD only (405 otherwise). One byte range gives 206 (416 when
//     unsatisfiable, If-Range honoured); several ranges give the whole object (200).
//   - ETag is the object's SHA-256 in quotes. Last-Modified is when the path's content
//     first appeared: the activation that brought it, carried forward across flips
//     while its SHA-256 stays the same (and kept on disk with the routes), so an
//     unchanged file keeps its date and `wget -N` fetches only what changed; a path
//     served only through a retained release, and not dated before, carries that
//     release's build date. dates.go says why dates are carried rather than derived
//     from the feed, and how a flip the edge missed can never leave a date that gives
//     a false 304. If-None-Match and If-Modified-Since answer 304. Because HTTP dates
//     have one-second resolution, a path outside by-hash/ and pool/ carries no
//     Last-Modified (and If-Modified-Since is ignored for it) during the first two
//     seconds after the activation that dated it: two flips within one second must
//     not produce a false 304.
//   - Cache-Control: by-hash/ and pool/ objects "public, max-age=31536000, immutable";
//     every other path (InRelease, Release, Release.gpg and the other indexes) "public,
//     max-age=60", so a downstream cache lags a flip by at most a minute, while a client
//     holding a stale InRelease still gets matching by-hash indexes.
//   - No byte is served before its object's size and SHA-256 are checked (invariant 9):
//     objects up to Config.StreamThreshold are cached in memory once checked; larger ones
//     are fetched into the disk cache (Config.DiskCache) while hashed and served, ranges
//     included, from the checked file (disk.go). Concurrent misses of one object make
//     one store fetch. A damaged store object is 502, logged and never cached; a
//     missing object or an unreachable store 503 with Retry-After: 5.
//
// Public connections wait in Go's own poller, and fasthttp enforces
// Config.RequestTimeout. With Config.ConnPoller "edged" (Linux) they wait instead in
// an epoll instance of edged's own that wakes ready connections first in, first out:
// an opt-in for a lower latency tail under load (package edged/internal/connpoll says
// why and what it was measured at).
//
// The edge talks to controld only over HTTP: of controld it imports only the wire
// package controld/api, whose routes.go defines the routes feed, its validation and
// both ends of its long poll.
package edged
