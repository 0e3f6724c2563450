#!/usr/bin/env bash
# Checks that the demo cannot lie (issue 20, item 7), in a throwaway DEMO_DIR:
#   1. with dummy listeners on the default ports it moves to free ports and still installs
#      through the edge, and its armor.toml follows the new controld;
#   2. an explicit address that is taken fails at once, naming the address;
#   3. a daemon that dies at start fails the demo with its log tail, and nothing is left running;
#   4. a re-run on the default ports (once free) works without deleting the demo directory.
# Needs bin/armor (make build) and python3. Only stops what it started.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
export DEMO_DIR=$tmp/demo
pids=()
cleanup() {
  DEMO_DIR=$tmp/demo "$top/configs/demo/run.sh" stop >/dev/null 2>&1 || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
ok() { printf 'ok   %s\n' "$*"; }
bad() { printf 'FAIL %s\n' "$*" >&2; sed 's/^/     | /' "$tmp/out" >&2; exit 1; }
demo() { "$top/configs/demo/run.sh" "$@" >"$tmp/out" 2>&1; }
daemons() { # the daemons of this DEMO_DIR still running
  local d n=0
  for d in controld edged; do
    [ -f "$DEMO_DIR/run/$d.pid" ] && kill -0 "$(cat "$DEMO_DIR/run/$d.pid")" 2>/dev/null && n=$((n + 1))
  done
  echo "$n"
}

# Dummy listeners on the default ports. A port that something else holds already (the
# user's own `make demo`, left running as README says) is just as good: no dummy is
# started there, and nothing this script did not start is stopped.
held() { ss -ltnH "sport = :$1" 2>/dev/null | grep -q .; }
for port in 17380 18080 19090; do
  held "$port" && continue
  python3 -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1 &
  pids+=($!)
done
for port in 17380 18080 19090; do
  for _ in $(seq 50); do held "$port" && break; sleep 0.2; done
  held "$port" || { echo "FAIL cannot hold port $port for the check" >&2; exit 1; }
done

demo || bad "1: the demo failed with its default ports taken"
grep -q 'installed natpmpc' "$tmp/out" || bad "1: no install through the edge"
. "$DEMO_DIR/run/addrs"
for a in "$controld" "$edge" "$admin"; do
  case "$a" in *:17380 | *:18080 | *:19090) bad "1: a daemon claims a taken port: $a" ;; esac
done
grep -qF "url = \"$controld\"" "$DEMO_DIR/repo/armor.toml" || bad "1: armor.toml does not name $controld"
ok "default ports taken: controld $controld, edge $edge, admin $admin; installed through the edge"

DEMO_CONTROLD=127.0.0.1:17380 demo && bad "2: an explicit taken address did not fail"
grep -q 'cannot listen on 127.0.0.1:17380' "$tmp/out" || bad "2: the error does not name the address"
ok "explicit taken address: $(grep -m1 'cannot listen' "$tmp/out")"

DEMO_EDGED_FLAGS="--store nosuchremote:bucket" demo && bad "3: a daemon that dies at start did not fail the demo"
grep -q 'edged exited at start' "$tmp/out" || bad "3: the death of edged is not reported"
grep -q 'nosuchremote' "$tmp/out" || bad "3: edged's log tail is not shown"
[ "$(daemons)" = 0 ] || bad "3: daemons left running after a failed start"
ok "edged dying at start is reported with its log, and controld is stopped"

for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
pids=()
sleep 0.5
busy=$(ss -ltnH 2>/dev/null | grep -cE ':(17380|18080|19090) ' || true)
demo || bad "4: the re-run failed"
. "$DEMO_DIR/run/addrs"
grep -qF "url = \"$controld\"" "$DEMO_DIR/repo/armor.toml" || bad "4: armor.toml does not name $controld"
grep -q 'installed natpmpc' "$tmp/out" || bad "4: no install through the edge"
if [ "$busy" = 0 ]; then
  [ "$controld" = http://127.0.0.1:17380 ] || bad "4: controld not back on its default port: $controld"
fi
ok "re-run in the same directory after a change of ports: controld $controld, edge $edge"
demo stop
[ "$(daemons)" = 0 ] || bad "stop left daemons running"
ok "stop"
