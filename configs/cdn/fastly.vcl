# The same rules as varnish.vcl for Fastly (custom VCL, uploaded as the service's main
# VCL; Fastly runs Varnish 2.1-style VCL with its #FASTLY macros). The origin is the
# edges (a backend per edge, or a balancer in front of them, defined in the service):
# edged's Cache-Control decides what is cached and for how long, and Fastly honours it.
#
#   immutable (cache for as long as Fastly keeps anything; never purge):
#       /…/by-hash/…   named by their content
#       /pool/…        named by their version
#     edged sends "public, max-age=31536000, immutable".
#   short-lived (purged at each activation by armor cdn purger, else stale for at most
#   a minute, which is safe: edges keep serving the by-hash indexes of releases active
#   within the retention window):
#       /dists/…/InRelease, Release, Release.gpg, the plain and compressed Packages,
#       Sources, Contents and Translation indexes, directory listings, the repository
#       page "/", /<repository>-archive-keyring.gpg and .asc
#     edged sends "public, max-age=60".
#   errors: edged sends "no-store"; never cached.
#
# Purging: armor cdn purger --purge-url 'https://{host}' --purge-header-env
# Fastly-Key=FASTLY_API_TOKEN sends Fastly a PURGE of each changed URL (Fastly's purge
# by URL). Not tested against Fastly itself (varnish.vcl is, against Varnish 7.1).

sub vcl_recv {
#FASTLY recv
    # One cache key per path: no query string (edged ignores it).
    set req.url = querystring.remove(req.url);
    # Directory listings are HTML or nginx-style JSON by Accept (edged sends Vary:
    # Accept): two variants.
    if (req.http.Accept ~ "application/json") {
        set req.http.Accept = "application/json";
    } else {
        unset req.http.Accept;
    }
    unset req.http.Cookie;
    unset req.http.Authorization;
    if (req.request != "GET" && req.request != "HEAD" && req.request != "FASTLYPURGE") {
        error 405 "Method Not Allowed";
    }
    return(lookup);
}

sub vcl_fetch {
#FASTLY fetch
    # One edge may be a moment behind another after a flip: an immutable path it does
    # not know yet, or an edge that fails, is asked again (of the next backend).
    if ((beresp.status == 404 && req.url ~ "/(by-hash|pool)/") || beresp.status >= 500) {
        if (req.restarts < 2) {
            restart;
        }
    }
    if (beresp.http.Cache-Control !~ "immutable") {
        # A stale mutable object may be served while it is fetched again.
        set beresp.stale_while_revalidate = 10s;
    }
    return(deliver);
}

sub vcl_deliver {
#FASTLY deliver
    return(deliver);
}
