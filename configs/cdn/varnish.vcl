# Varnish (7.x) in front of armor's edges: a CDN of your own. Tested as it is by
# cli/cdn_test.go (Debian's varnish 7.1), the backends replaced by the test's edges.
#
# edged already says what may be cached and for how long, by Cache-Control:
#   - by-hash/ and pool/ paths: "public, max-age=31536000, immutable". They are named by
#     their content (by-hash) or their version (pool), so they never change: cache them
#     for as long as the CDN keeps anything, and never purge them.
#   - every other path (InRelease, Release, Release.gpg, the plain Packages, Sources and
#     Contents indexes, directory listings, the repository page "/", the keyrings):
#     "public, max-age=60". They change at each activation; a client that reads a stale
#     InRelease still gets matching by-hash indexes (edges keep serving the releases
#     active within the retention window), so a cached copy is never wrong, only late.
#     The purger (armor cdn purger, fed by controld's activate webhook) purges what an
#     activation changed, so clients see it at once rather than within a minute.
#   - errors: "no-store", never cached (a 404 of a path an edge does not know yet must
#     not outlive the flip that brings it).
# This file adds: one normalised cache key per path (the Host as edged normalises it,
# no query string), PURGE of one path and BAN of a whole hostname from the purger's
# addresses only, and a retry on the other edge when one answers an immutable path
# with 404 or 5xx (one edge may be a moment behind another after a flip).
vcl 4.1;

import directors;
import std;

# BEGIN BACKENDS: one per edge (edged's public listener, plain HTTP), checked by a probe
# of a path every routed hostname serves. Replace the addresses and the hostname.
probe edge_ready {
    .request = "HEAD /dists/stable/InRelease HTTP/1.1"
               "Host: apt.example.org"
               "Connection: close";
    .expected_response = 200;
    .interval = 2s;
    .timeout = 1s;
    .window = 3;
    .threshold = 2;
}
backend edge1 { .host = "10.0.0.11"; .port = "80"; .probe = edge_ready; }
backend edge2 { .host = "10.0.0.12"; .port = "80"; .probe = edge_ready; }

sub vcl_init {
    new edges = directors.round_robin();
    edges.add_backend(edge1);
    edges.add_backend(edge2);
}
# END BACKENDS

# Who may PURGE and BAN: the host running armor cdn purger.
acl purgers {
    "localhost";
    "127.0.0.1";
    "::1";
}

sub vcl_recv {
    # A client that takes the CDN for a proxy (apt with Acquire::http::Proxy) sends an
    # absolute URL: its host is the Host.
    if (req.url ~ "^(?i)https?://") {
        set req.http.Host = regsub(req.url, "^(?i)https?://([^/]*).*$", "\1");
        set req.url = regsub(req.url, "^(?i)https?://[^/]*", "");
    }
    # The cache key: the hostname as edged normalises it (lowercase, no port, no final
    # dot) and the path without a query string (edged ignores it).
    set req.http.Host = std.tolower(regsub(req.http.Host, "(\.)?(:[0-9]+)?$", ""));
    set req.url = regsub(req.url, "\?.*$", "");
    set req.backend_hint = edges.backend();

    if (req.method == "PURGE") {
        if (!client.ip ~ purgers) {
            return (synth(405, "PURGE only from the purger"));
        }
        return (purge);
    }
    if (req.method == "BAN") {
        if (!client.ip ~ purgers) {
            return (synth(405, "BAN only from the purger"));
        }
        # Every mutable object of the hostname (a purge too long to list).
        ban("obj.http.X-Armor-Host == " + req.http.Host + " && obj.http.Cache-Control !~ immutable");
        return (synth(200, "Banned"));
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (synth(405, "Method Not Allowed"));
    }
    # Directory listings are HTML or nginx-style JSON by Accept (edged sends Vary:
    # Accept): two variants, not one per browser.
    if (req.http.Accept ~ "application/json") {
        set req.http.Accept = "application/json";
    } else {
        unset req.http.Accept;
    }
    # apt sends neither cookies nor credentials; nothing here is private.
    unset req.http.Cookie;
    unset req.http.Authorization;
    return (hash);
}

sub vcl_backend_response {
    # One edge may be a moment behind another after a flip: an immutable path it does
    # not know yet, or an edge that fails, is asked of the next edge.
    if ((beresp.status == 404 && bereq.url ~ "/(by-hash|pool)/") || beresp.status >= 500) {
        if (bereq.retries < 2) {
            return (retry);
        }
    }
    # For BAN: the hostname, on the cached object.
    set beresp.http.X-Armor-Host = bereq.http.Host;
    # Serve a stale mutable object for a few seconds while it is fetched again: a
    # stale InRelease is safe (its by-hash indexes stay served).
    if (beresp.http.Cache-Control !~ "immutable") {
        set beresp.grace = 10s;
    }
    # Cache-Control decides the rest (builtin VCL): max-age as TTL, no-store uncached.
}

sub vcl_backend_error {
    if (bereq.retries < 2) {
        return (retry);
    }
}

sub vcl_deliver {
    unset resp.http.X-Armor-Host;
    # Whether the CDN answered from its cache, for the curious.
    if (obj.hits > 0) {
        set resp.http.X-Cache = "HIT";
    } else {
        set resp.http.X-Cache = "MISS";
    }
}
