#!/usr/bin/env bash
# build-and-run.sh: builds Queen MQ's C++ server from a checkout of Queen's repository that you
# fetched yourself, then runs it in the foreground so that `ackbench run --broker-url` can drive
# it. Nothing of Queen's is copied into this repository: the build happens inside the checkout
# (Queen's own `make` writes server/vendor/, server/build/ and server/bin/ there).
#
# Usage:
#   tools/queen/build-and-run.sh QUEEN_CHECKOUT [options]
#
#   QUEEN_CHECKOUT       a checkout of https://github.com/queen-mq/queen at a revision whose
#                        server/ is the C++ server (server/Makefile and lib/schema/schema.sql)
#
# Options:
#   --port N             HTTP port for Queen (default 6640; our broker's default is 6632)
#   --host ADDR          listen address (default 127.0.0.1: reachable from this machine only)
#   --database-url URL   postgres://[user[:password]@]host[:port]/database
#                        (default postgres://postgres@127.0.0.1:5432/queen); the database must
#                        exist, Queen installs its schema `queen` and procedures there at start
#   --workers N          Queen's NUM_WORKERS (default 2)
#   --pool N             Queen's DB_POOL_SIZE (default 40; with SIDECAR_POOL_SIZE 20 this fits a
#                        PostgreSQL with max_connections 200)
#   --jobs N             parallel compile jobs (default: the number of cores)
#   --run-dir DIR        where Queen's file buffer goes (default: a new temporary directory)
#   --build-only         build, print the server's path, and stop
#   -h, --help           this text
#
# Queen's server also runs with QUEEN_SYNC_ENABLED=false and LOG_LEVEL=info, and gets only the
# variables above (plus PATH and HOME): QUEEN_* variables meant for our broker never reach it.
#
# Needs: g++, gcc, make, cmake, curl and unzip (Queen's Makefile downloads its pinned
# dependencies with curl and builds libuv with cmake), and the headers of libpq, OpenSSL and zlib
# (and zstd where Queen's Makefile links it). On Debian or Ubuntu:
#   apt-get install -y build-essential cmake curl unzip libpq-dev libssl-dev zlib1g-dev libzstd-dev
# The first build takes about 5 minutes on 2 cores; later runs rebuild only what changed, with
# Queen's offline target `build-only` (no downloads). Without github.com, fill server/vendor/ as
# the Makefile's deps rule lays it out (json.hpp, httplib.h, uWebSockets/, uSockets/, spdlog/,
# jwt-cpp/, libuv/ with build/libuv.a) and touch server/vendor/.deps_ready first.
#
# Exit status: 2 for a bad argument or a missing input (the message says which), 1 when the
# build or the server fails; otherwise the server's own status once you stop it (Ctrl-C).
set -uo pipefail

me=build-and-run.sh
say() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { say "$2"; exit "$1"; }
usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; }

# ---------------------------------------------------------------- arguments
checkout="" port=6640 host=127.0.0.1 database_url="postgres://postgres@127.0.0.1:5432/queen"
workers=2 pool=40 jobs="" run_dir="" build_only=""
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die 2 "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --port) need_value "$@"; port=$2; shift 2 ;;
    --host) need_value "$@"; host=$2; shift 2 ;;
    --database-url) need_value "$@"; database_url=$2; shift 2 ;;
    --workers) need_value "$@"; workers=$2; shift 2 ;;
    --pool) need_value "$@"; pool=$2; shift 2 ;;
    --jobs) need_value "$@"; jobs=$2; shift 2 ;;
    --run-dir) need_value "$@"; run_dir=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --port=*|--host=*|--database-url=*|--workers=*|--pool=*|--jobs=*|--run-dir=*)
      opt=${1%%=*}; set -- "$opt" "${1#*=}" "${@:2}" ;;
    -*) die 2 "unknown option $1 (see --help)" ;;
    *) [ -z "$checkout" ] || die 2 "one checkout path only (got '$checkout' and '$1')"
       checkout=$1; shift ;;
  esac
done

[ -n "$checkout" ] || die 2 "missing the path of a Queen checkout: $me /path/to/queen-checkout [--port N] [--database-url URL] (fetch it with: git clone https://github.com/queen-mq/queen)"
[ -d "$checkout" ] || die 2 "$checkout is not a directory (fetch Queen with: git clone https://github.com/queen-mq/queen $checkout)"
checkout=$(cd "$checkout" && pwd) || die 2 "cannot enter $checkout"
[ -f "$checkout/server/Makefile" ] || die 2 "$checkout has no server/Makefile: not a Queen checkout, or a revision without the C++ server (check out one that has it)"
[ -f "$checkout/lib/schema/schema.sql" ] || die 2 "$checkout has no lib/schema/schema.sql, which Queen's server loads at start"
[ -w "$checkout/server" ] || die 2 "$checkout/server is not writable: Queen's make builds inside it"

is_count() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
is_count "$port" 1 65535 || die 2 "--port must be a number in 1..65535, got '$port'"
is_count "$workers" 1 1024 || die 2 "--workers must be a number in 1..1024, got '$workers'"
is_count "$pool" 1 10000 || die 2 "--pool must be a number in 1..10000, got '$pool'"
[ -z "$jobs" ] || is_count "$jobs" 1 1024 || die 2 "--jobs must be a number in 1..1024, got '$jobs'"
jobs=${jobs:-$(nproc 2>/dev/null || echo 2)}

# postgres://[user[:password]@]host[:port]/database[?...]: Queen takes PG_* variables, not a URL.
url_re='^postgres(ql)?://(([^:@/]*)(:([^@/]*))?@)?([^:/?]+|\[[0-9A-Fa-f:]+\])(:([0-9]+))?/([^?]+)(\?.*)?$'
[[ $database_url =~ $url_re ]] || die 2 "--database-url must look like postgres://user[:password]@host[:port]/database, got '$database_url'"
pg_user=${BASH_REMATCH[3]:-postgres}
pg_password=${BASH_REMATCH[5]:-}
pg_host=${BASH_REMATCH[6]}
pg_host=${pg_host#[}; pg_host=${pg_host%]}
pg_port=${BASH_REMATCH[8]:-5432}
pg_db=${BASH_REMATCH[9]}
[ -z "${BASH_REMATCH[10]:-}" ] || say "note: ignoring the URL's parameters ${BASH_REMATCH[10]} (Queen takes host, port, user, password and database only)"
[[ $pg_user$pg_password$pg_db != *%* ]] || die 2 "--database-url: percent-encoded user, password or database names are not supported; write them plainly"

# ---------------------------------------------------------------- build tools
missing=()
for tool in g++ gcc make cmake curl unzip; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if command -v g++ >/dev/null 2>&1; then
  libs="-lpq -lssl -lcrypto -lz" dev_files="libpq, OpenSSL and zlib"
  headers='#include <libpq-fe.h>\n#include <openssl/ssl.h>\n#include <zlib.h>\n'
  if grep -q -- '-lzstd' "$checkout/server/Makefile"; then
    libs="$libs -lzstd" dev_files="libpq, OpenSSL, zlib and zstd"
    headers="$headers#include <zstd.h>\n"
  fi
  # shellcheck disable=SC2086  # $libs is a list of flags
  printf "${headers}int main(void) { return 0; }\n" \
    | g++ -x c++ - -o /dev/null -I/usr/include/postgresql -I/usr/local/include/postgresql $libs >/dev/null 2>&1 \
    || missing+=("the development files of $dev_files")
fi
if [ ${#missing[@]} -gt 0 ]; then
  list=$(printf '%s, ' "${missing[@]}")
  die 2 "missing build tools: ${list%, } (Debian or Ubuntu: apt-get install -y build-essential cmake curl unzip libpq-dev libssl-dev zlib1g-dev libzstd-dev)"
fi

# ---------------------------------------------------------------- build
revision=$(git -C "$checkout" log -1 --format='%h %cs' 2>/dev/null || echo "revision unknown: not a git checkout")
# Queen's default target fetches its dependencies again on every call (its download rule hangs
# off a phony target), so once server/vendor/ is complete the offline target `build-only` builds
# instead; without it, the downloads need github.com.
make_target=""
if [ -f "$checkout/server/vendor/.deps_ready" ] && grep -q '^build-only:' "$checkout/server/Makefile"; then
  make_target=build-only
  say "building Queen's server in $checkout/server ($revision) with make build-only -j$jobs (dependencies already in server/vendor/)"
else
  curl -fsS -o /dev/null --max-time 15 https://github.com 2>/dev/null \
    || die 2 "server/vendor/ of $checkout is not ready and github.com cannot be reached: Queen's make downloads its pinned dependencies from there (see the URLs in server/Makefile); put them into server/vendor/ as its deps rule lays them out, build vendor/libuv/build/libuv.a, touch server/vendor/.deps_ready, and run this again"
  say "building Queen's server in $checkout/server ($revision) with make -j$jobs"
  say "Queen's make downloads its pinned dependencies into server/vendor/ the first time (about 5 minutes on 2 cores in all)"
fi
make -C "$checkout/server" -j"$jobs" $make_target >&2 || die 1 "make failed in $checkout/server (its output is above)"
server_bin=$checkout/server/bin/queen-server
[ -x "$server_bin" ] || die 1 "make finished but $server_bin is missing"
say "built $server_bin"
if [ -n "$build_only" ]; then
  echo "$checkout/server"
  exit 0
fi

# ---------------------------------------------------------------- run
port_in_use() {
  if command -v ss >/dev/null 2>&1; then
    [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}
port_in_use "$port" && die 2 "port $port is already in use: choose another with --port"
if command -v pg_isready >/dev/null 2>&1; then
  pg_isready -q -h "$pg_host" -p "$pg_port" -d "$pg_db" -U "$pg_user" \
    || say "warning: PostgreSQL at $pg_host:$pg_port does not answer yet (pg_isready); Queen will fail to start without it"
fi

if [ -z "$run_dir" ]; then
  run_dir=$(mktemp -d "${TMPDIR:-/tmp}/queen-run.XXXXXX") || die 1 "cannot create a temporary run directory"
fi
mkdir -p "$run_dir/buffer" || die 1 "cannot create $run_dir/buffer"
run_dir=$(cd "$run_dir" && pwd)

say "starting Queen on http://$host:$port (database $pg_db on $pg_host:$pg_port as $pg_user; $workers workers, pool $pool; file buffer in $run_dir/buffer)"
say "drive it with: target/release/ackbench run SCENARIO --broker-url http://$host:$port --database-url $database_url"
say "stop it with Ctrl-C"
cd "$checkout/server" || die 1 "cannot enter $checkout/server"
# The server finds ../lib/schema/schema.sql relative to server/, so it runs from there.
exec env -i PATH="$PATH" HOME="${HOME:-/}" \
  HOST="$host" PORT="$port" \
  PG_HOST="$pg_host" PG_PORT="$pg_port" PG_USER="$pg_user" PG_PASSWORD="$pg_password" PG_DB="$pg_db" \
  NUM_WORKERS="$workers" DB_POOL_SIZE="$pool" SIDECAR_POOL_SIZE=20 \
  QUEEN_SYNC_ENABLED=false FILE_BUFFER_DIR="$run_dir/buffer" LOG_LEVEL=info \
  ./bin/queen-server
