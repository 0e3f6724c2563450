#!/usr/bin/env bash
# The whole armor pipeline on one machine, on embedded defaults:
#   armor init → armor build → controld → edged → armor push → apt-get through the edge.
# Everything lives under ./demo (git ignores it). Running it again reuses what is there.
#   configs/demo/run.sh          run (daemons are left running)
#   configs/demo/run.sh stop     stop the daemons
# Environment: DEMO_DIR (default ./demo), DEMO_DEBS (a directory of .deb files to publish
# instead of the bundled ones), DEMO_CONTROLD (127.0.0.1:17380), DEMO_EDGE (127.0.0.1:18080),
# DEMO_ADMIN (127.0.0.1:19090), DEMO_HOST (apt.demo.test).
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
armor="$top/bin/armor"
dir=$(mkdir -p "${DEMO_DIR:-$top/demo}" && cd "${DEMO_DIR:-$top/demo}" && pwd)
controld_addr=${DEMO_CONTROLD:-127.0.0.1:17380}
edge_addr=${DEMO_EDGE:-127.0.0.1:18080}
admin_addr=${DEMO_ADMIN:-127.0.0.1:19090}
host=${DEMO_HOST:-apt.demo.test}
repo="$dir/repo"
run="$dir/run"
mkdir -p "$run"

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
step() { printf '  $ %s\n' "$*"; "$@"; }

stop() {
  for d in edged controld; do
    if [ -f "$run/$d.pid" ] && kill -0 "$(cat "$run/$d.pid")" 2>/dev/null; then
      kill -TERM "$(cat "$run/$d.pid")"
      for _ in $(seq 50); do kill -0 "$(cat "$run/$d.pid")" 2>/dev/null || break; sleep 0.1; done
      echo "stopped $d"
    fi
    rm -f "$run/$d.pid"
  done
}

if [ "${1:-}" = stop ]; then stop; exit 0; fi
[ -x "$armor" ] || { echo "build armor first: make build" >&2; exit 1; }

wait_http() { # url what
  for _ in $(seq 100); do
    if curl -fsS -o /dev/null "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "$2 did not come up; its log:" >&2; tail -20 "$run/$2.log" >&2; exit 1
}

say "1. A repository: armor init (once), the .deb files, armor build"
if [ ! -f "$repo/armor.toml" ]; then
  mkdir -p "$repo"
  step "$armor" init --dir "$repo" --name demo --origin "armor demo" --hostname "$host" \
    --codename stable --component main --arch amd64 --store "$dir/store" --controld "http://$controld_addr"
fi
src=${DEMO_DEBS:-$top/testdata/debs}
cp -p "$src"/*.deb "$repo/debs/"
(cd "$repo" && step "$armor" build)

say "2. controld, with its embedded database in $dir/controld"
stop >/dev/null
if [ ! -f "$run/admin.token" ]; then
  "$armor" controld token --data-dir "$dir/controld" demo-admin --for '*' --action admin --action push --action activate --action read > "$run/admin.token"
  "$armor" controld token --data-dir "$dir/controld" demo-edge --for '*' --action read > "$run/edge.token"
  echo "  created tokens demo-admin and demo-edge (secrets in $run/*.token)"
fi
"$armor" controld --listen "$controld_addr" --data-dir "$dir/controld" --store "$dir/store" >>"$run/controld.log" 2>&1 &
echo $! > "$run/controld.pid"
wait_http "http://$controld_addr/v1/healthz" controld
echo "  controld on http://$controld_addr (log: $run/controld.log)"

say "3. edged, serving $host from the store"
ARMOR_EDGE_TOKEN=$(cat "$run/edge.token") "$armor" edged --listen "$edge_addr" --admin-listen "$admin_addr" \
  --controld "http://$controld_addr" --store "$dir/store" --state-dir "$dir/edged" >>"$run/edged.log" 2>&1 &
echo $! > "$run/edged.pid"
wait_http "http://$admin_addr/healthz" edged
echo "  edged on http://$edge_addr, metrics on http://$admin_addr/metrics (log: $run/edged.log)"

say "4. armor push: upload what the store lacks, record and activate in controld"
export ARMOR_TOKEN
ARMOR_TOKEN=$(cat "$run/admin.token")
(cd "$repo" && { "$armor" repos show >/dev/null 2>&1 || step "$armor" repos create; })
(cd "$repo" && step "$armor" push)
(cd "$repo" && step "$armor" status)

say "5. apt-get through the edge (a throwaway apt configuration in $dir/apt)"
keyring="$repo/keys/demo-archive-keyring.gpg"
apt="$dir/apt"
rm -rf "$apt" && mkdir -p "$apt"/{etc/sources.list.d,etc/preferences.d,etc/trusted.gpg.d,etc/apt.conf.d,state/lists/partial,cache/archives/partial,log} "$dir/root"
# This machine's dpkg status tells apt what is installed already (libc6...). apt only reads it.
status=/var/lib/dpkg/status
cat > "$apt/etc/sources.list.d/demo.sources" <<SRC
Types: deb
URIs: http://$host/
Suites: stable
Components: main
Signed-By: $keyring
SRC
aptopts=(-o "Dir::Etc=$apt/etc" -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt/etc/sources.list.d"
  -o "Dir::Etc::Parts=$apt/etc/apt.conf.d" -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$apt/etc/preferences.d"
  -o "Dir::Etc::Trusted=/dev/null" -o "Dir::Etc::TrustedParts=$apt/etc/trusted.gpg.d"
  -o "Dir::State=$apt/state" -o "Dir::State::status=$status" -o "Dir::Cache=$apt/cache" -o "Dir::Log=$apt/log"
  -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root" -o "APT::Architectures=amd64" -o "APT::Architecture=amd64"
  -o "Acquire::http::Proxy=http://$edge_addr" -o "Acquire::Languages=none")
# Give the edge a moment to learn of the flip (it long-polls controld).
for _ in $(seq 30); do
  curl -fsS -o /dev/null -x "http://$edge_addr" "http://$host/dists/stable/InRelease" 2>/dev/null && break; sleep 0.1
done
out=$(apt-get "${aptopts[@]}" update 2>&1); echo "$out" | sed 's/^/  /'
if echo "$out" | grep -qE '^(W|E|Err):'; then echo "apt-get update reported problems" >&2; exit 1; fi
pkg=natpmpc
[ -n "${DEMO_DEBS:-}" ] && pkg=$(dpkg-deb -f "$(ls "$src"/*.deb | head -1)" Package)
apt-get "${aptopts[@]}" -s install "$pkg" | sed 's/^/  /'
(cd "$dir/root" && apt-get "${aptopts[@]}" download $(apt-get "${aptopts[@]}" -s install "$pkg" | awk '/^Inst /{print $2}') 2>&1 | sed 's/^/  /'
  for f in ./*.deb; do dpkg -x "$f" .; done; rm -f ./*.deb)
echo "  installed $pkg and its dependencies into $dir/root (apt-get download + dpkg -x: no root install on this machine)"
if [ "$pkg" = natpmpc ]; then
  LD_LIBRARY_PATH="$dir/root/usr/lib/x86_64-linux-gnu" "$dir/root/usr/bin/natpmpc" -h 2>&1 | head -3 | sed 's/^/  natpmpc: /' || true
fi

say "Done. What you need next"
cat <<NEXT
  Repository URL (through the edge): http://$host/   (edge at http://$edge_addr; point DNS or a proxy at it)
  Signing key: $repo/keys/demo-archive-keyring.asc  (binary keyring: $keyring)
  On an apt client, install the key as /etc/apt/keyrings/demo-archive-keyring.gpg and add
  /etc/apt/sources.list.d/demo.sources:

    Types: deb
    URIs: http://$host/
    Suites: stable
    Components: main
    Signed-By: /etc/apt/keyrings/demo-archive-keyring.gpg

  Publish a change:  cd $repo && cp new.deb debs/ && $armor build && ARMOR_TOKEN=\$(cat $run/admin.token) $armor push
  The daemons keep running. Stop them with:  make demo-stop   (or configs/demo/run.sh stop)
NEXT
