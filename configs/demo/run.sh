#!/usr/bin/env bash
# The whole armor pipeline on one machine, on embedded defaults:
#   armor init → armor build → controld → edged → armor push → apt-get through the edge.
# Everything lives under ./demo (git ignores it). Running it again reuses what is there.
#   configs/demo/run.sh          run (daemons are left running)
#   configs/demo/run.sh stop     stop the daemons
# Environment: DEMO_DIR (default ./demo), DEMO_DEBS (a directory of .deb files to publish
# instead of the bundled ones), DEMO_HOST (apt.demo.test), and the addresses the daemons
# listen on: DEMO_CONTROLD (127.0.0.1:17380), DEMO_EDGE (127.0.0.1:18080), DEMO_ADMIN
# (127.0.0.1:19090). A default address whose port another program holds is replaced by a
# free port (the daemon binds port 0 and logs the port it got); an address you set and
# that is taken is an error. Port 0 (e.g. DEMO_EDGE=127.0.0.1:0) always asks for a free one.
# DEMO_CONTROLD_FLAGS and DEMO_EDGED_FLAGS add flags to the daemons' command lines.
# The addresses of the last run are in demo/run/addrs; the demo's armor.toml is pointed at
# the controld of each run.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
armor="$top/bin/armor"
dir=$(mkdir -p "${DEMO_DIR:-$top/demo}" && cd "${DEMO_DIR:-$top/demo}" && pwd)
host=${DEMO_HOST:-apt.demo.test}
repo="$dir/repo"
run="$dir/run"
mkdir -p "$run"

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
step() { printf '  $ %s\n' "$*"; "$@"; }

# ours PID NAME: PID is this demo's NAME daemon (this armor binary, this demo directory),
# not some other process that got a stale pid file's number.
ours() {
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  case "$cmd" in "$armor $2 "*"$dir/"*) return 0 ;; esac
  return 1
}

stop() {
  local d pid
  for d in edged controld; do
    if [ -f "$run/$d.pid" ]; then
      pid=$(cat "$run/$d.pid")
      if kill -0 "$pid" 2>/dev/null; then
        if ours "$pid" "$d"; then
          kill -TERM "$pid"
          for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
          if kill -0 "$pid" 2>/dev/null; then echo "$d (pid $pid) did not stop within 5s" >&2; else echo "stopped $d"; fi
        else
          echo "not stopping pid $pid: it is not this demo's $d (stale $run/$d.pid)" >&2
        fi
      fi
      rm -f "$run/$d.pid"
    fi
  done
}

if [ "${1:-}" = stop ]; then stop; exit 0; fi
[ -x "$armor" ] || { echo "build armor first: make build" >&2; exit 1; }

# listen_inodes PORT: the inodes of the TCP sockets listening on PORT, on any address.
listen_inodes() {
  local hex
  hex=$(printf ':%04X' "$1")
  awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
port_busy() { [ -n "$(listen_inodes "$1")" ]; }
# owns_port PID PORT: PID holds the socket listening on PORT.
owns_port() {
  local ino
  for ino in $(listen_inodes "$2"); do
    ls -l "/proc/$1/fd" 2>/dev/null | grep -qF "socket:[$ino]" && return 0
  done
  return 1
}
holder() { # PORT: who listens there, when ss can tell
  if command -v ss >/dev/null 2>&1; then ss -ltnpH "sport = :$1" 2>/dev/null | sed 's/^/    /'; fi
}

# want WHAT VAR DEFAULT: the address WHAT listens on. The default when its port is free,
# else 127.0.0.1:0 (the daemon picks a free port); an address set in VAR must be free.
want() {
  local what=$1 var=$2 addr=${!2:-$3} port
  port=${addr##*:}
  if [ "$port" != 0 ] && port_busy "$port"; then
    if [ -n "${!var:-}" ]; then
      echo "$what cannot listen on $addr ($var): another program holds port $port" >&2
      holder "$port" >&2
      exit 1
    fi
    echo "  port $port is taken by another program; $what listens on a free port instead" >&2
    addr=${addr%:*}:0
  fi
  echo "$addr"
}

# start NAME CMD...: runs the daemon NAME in the background, its output appended to
# $run/NAME.log and its pid in $run/NAME.pid.
start() {
  local name=$1
  shift
  touch "$run/$name.log"
  logoff=$(stat -c %s "$run/$name.log")
  "$@" >>"$run/$name.log" 2>&1 &
  echo $! >"$run/$name.pid"
}

# fail NAME WHY: reports WHY with the end of what NAME logged in this run, stops the
# daemons this run started and exits 1.
fail() {
  {
    echo
    echo "demo: $1 $2"
    echo "  the end of its log ($run/$1.log):"
    tail -c +$((logoff + 1)) "$run/$1.log" | tail -n 20 | sed 's/^/    /'
  } >&2
  stop >&2
  exit 1
}

# listening NAME: waits until the daemon NAME (pid in $run/NAME.pid) logs "NAME listening"
# and sets line to that log line. A daemon that exits first is reported.
listening() {
  local name=$1 pid status
  pid=$(cat "$run/$name.pid")
  for _ in $(seq 150); do
    line=$(tail -c +$((logoff + 1)) "$run/$name.log" | grep -m1 "msg=\"$name listening\"" || true)
    if [ -n "$line" ]; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      status=0
      wait "$pid" || status=$?
      fail "$name" "exited at start (exit status $status)"
    fi
    sleep 0.1
  done
  fail "$name" "did not start listening within 15s"
}

# mine NAME ADDR: the listener on ADDR is the daemon NAME this run started, so the
# health checks below cannot reach some other program.
mine() {
  local pid
  pid=$(cat "$run/$1.pid")
  kill -0 "$pid" 2>/dev/null || fail "$1" "exited after it started listening"
  owns_port "$pid" "${2##*:}" || fail "$1" "logged that it listens on $2, but pid $pid does not hold that port"
}

# healthy NAME URL [CURL ARGS...]: waits for URL to answer 2xx while NAME stays alive.
healthy() {
  local name=$1 url=$2 pid code
  shift 2
  pid=$(cat "$run/$name.pid")
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || fail "$name" "exited while starting"
    code=$(curl -sS -o /dev/null -w '%{http_code}' "$@" "$url" 2>/dev/null || true)
    case "$code" in 2??) return 0 ;; esac
    sleep 0.1
  done
  fail "$name" "did not answer $url with success within 10s (last status ${code:-none})"
}

say "1. A repository: armor init (once), the .deb files, armor build"
if [ ! -f "$repo/armor.toml" ]; then
  mkdir -p "$repo"
  step "$armor" init --dir "$repo" --name demo --origin "armor demo" --hostname "$host" \
    --codename stable --component main --arch amd64 --store "$dir/store" --controld "http://${DEMO_CONTROLD:-127.0.0.1:17380}"
fi
src=${DEMO_DEBS:-$top/testdata/debs}
cp -p "$src"/*.deb "$repo/debs/"
(cd "$repo" && step "$armor" build)

say "2. controld, with its embedded database in $dir/controld"
stop >/dev/null
controld_addr=$(want controld DEMO_CONTROLD 127.0.0.1:17380)
edge_addr=$(want edged DEMO_EDGE 127.0.0.1:18080)
admin_addr=$(want "edged's admin listener" DEMO_ADMIN 127.0.0.1:19090)
if [ ! -f "$run/admin.token" ]; then
  "$armor" controld token --data-dir "$dir/controld" demo-admin --for '*' --action admin --action push --action activate --action read > "$run/admin.token"
  "$armor" controld token --data-dir "$dir/controld" demo-edge --for '*' --action read > "$run/edge.token"
  echo "  created tokens demo-admin and demo-edge (secrets in $run/*.token)"
fi
start controld "$armor" controld --listen "$controld_addr" --data-dir "$dir/controld" --store "$dir/store" ${DEMO_CONTROLD_FLAGS:-}
listening controld
controld_addr=$(sed -n 's/.* addr=\([^ ]*\).*/\1/p' <<<"$line")
mine controld "$controld_addr"
healthy controld "http://$controld_addr/v1/healthz"
# Only the controld that holds our data directory knows the demo's admin token.
healthy controld "http://$controld_addr/v1/repos" -H "Authorization: Bearer $(cat "$run/admin.token")"
echo "  controld on http://$controld_addr, pid $(cat "$run/controld.pid") (log: $run/controld.log)"
# The repository's armor.toml names controld; point it at this run's, whatever its port.
sed -i '/^\[controld\]/,/^\[/ s|^url = .*|url = "http://'"$controld_addr"'"|' "$repo/armor.toml"
grep -qF "url = \"http://$controld_addr\"" "$repo/armor.toml" || { echo "demo: cannot set [controld] url in $repo/armor.toml" >&2; stop; exit 1; }

say "3. edged, serving $host from the store"
start edged env ARMOR_EDGE_TOKEN="$(cat "$run/edge.token")" "$armor" edged --listen "$edge_addr" --admin-listen "$admin_addr" \
  --controld "http://$controld_addr" --store "$dir/store" --state-dir "$dir/edged" ${DEMO_EDGED_FLAGS:-}
listening edged
edge_addr=$(sed -n 's/.* listen=\([^ ]*\).*/\1/p' <<<"$line")
admin_addr=$(sed -n 's/.* admin=\([^ ]*\).*/\1/p' <<<"$line")
mine edged "$edge_addr"
mine edged "$admin_addr"
healthy edged "http://$admin_addr/healthz"
echo "  edged on http://$edge_addr, metrics on http://$admin_addr/metrics, pid $(cat "$run/edged.pid") (log: $run/edged.log)"
printf 'controld=http://%s\nedge=http://%s\nadmin=http://%s\n' "$controld_addr" "$edge_addr" "$admin_addr" >"$run/addrs"

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
  On an apt client, install the key as /usr/share/keyrings/demo-archive-keyring.gpg and add
  /etc/apt/sources.list.d/demo.sources:

    Types: deb
    URIs: http://$host/
    Suites: stable
    Components: main
    Signed-By: /usr/share/keyrings/demo-archive-keyring.gpg

  Publish a change:  cd $repo && cp new.deb debs/ && $armor build && ARMOR_TOKEN=\$(cat $run/admin.token) $armor push
  The daemons keep running. Stop them with:  make demo-stop   (or configs/demo/run.sh stop)
NEXT
