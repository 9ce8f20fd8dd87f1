#!/usr/bin/env bash
# Builds tidb-server at one pinned pseudo-version from the Go module proxy and
# prints the binary's path. The proxy lists no versions for github.com/pingcap/tidb
# and its go.mod replaces pkg/parser with a local path, so `go install` cannot
# build it: the script downloads both modules at the same commit, puts the
# parser at pkg/parser of a writable copy of the main module and builds there.
#
# Cached three ways: the modules in GOMODCACHE, compiled packages in GOCACHE and
# the binary in $STOCKGUARD_BIN_DIR (default $XDG_CACHE_HOME/stockguard/bin),
# named by version, so a second run for the same version only checks a file.
# A cold build takes about 8 minutes on 2 cores and 2.4 GB of memory; it runs
# under nice so the machine stays usable.
set -euo pipefail

# One commit of pingcap/tidb: the main module and its parser submodule.
commit_time=20251126154744
commit=e4e814fdc0af
tidb_version=v1.1.0-beta.0.${commit_time}-${commit}
parser_version=v0.0.0-${commit_time}-${commit}

bin_dir=${STOCKGUARD_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stockguard/bin}
out=$bin_dir/tidb-server-$tidb_version
# internal/backends runs $bin_dir/tidb-server: the link names the pinned build.
link() { ln -sfn "tidb-server-$tidb_version" "$bin_dir/tidb-server"; echo "$out"; }
if [ -x "$out" ]; then
  link
  exit 0
fi

command -v go >/dev/null || { echo "build-tidb: a Go toolchain is required" >&2; exit 1; }
mkdir -p "$bin_dir"
export GOTOOLCHAIN=local GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=mod"

modcache=$(go env GOMODCACHE)
(cd / && go mod download "github.com/pingcap/tidb@$tidb_version" "github.com/pingcap/tidb/pkg/parser@$parser_version")
src=$(mktemp -d "${TMPDIR:-/tmp}/build-tidb.XXXXXX")
trap 'rm -rf "$src"' EXIT
cp -R "$modcache/github.com/pingcap/tidb@$tidb_version/." "$src/"
chmod -R u+w "$src"
rm -rf "$src/pkg/parser"
cp -R "$modcache/github.com/pingcap/tidb/pkg/parser@$parser_version" "$src/pkg/parser"
chmod -R u+w "$src/pkg/parser"

# The release version is what tidb_version() and VERSION() report.
ldflags="-s -w \
 -X github.com/pingcap/tidb/pkg/parser/mysql.TiDBReleaseVersion=$tidb_version \
 -X github.com/pingcap/tidb/pkg/util/versioninfo.TiDBGitHash=$commit"
echo "build-tidb: building tidb-server $tidb_version (cold: about 8 minutes)" >&2
(cd "$src" && nice -n 19 go build -trimpath -ldflags="$ldflags" -o "$out.tmp" ./cmd/tidb-server)
mv "$out.tmp" "$out"
link
