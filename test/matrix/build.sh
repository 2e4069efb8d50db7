#!/usr/bin/env bash
# Provides the servers the tests run on besides the redis-server on PATH (test/support/servers.ts):
# Valkey 8.1 and Redis 8.0, built from Debian trixie's source packages (the upstream tarball, with
# libc's malloc and no TLS) into ${XDG_CACHE_HOME:-~/.cache}/sluice/servers/<name>-<version>/.
# A server found there is not built again. Needs Debian (apt, its archive keyring), a C compiler and make.
# Usage: test/matrix/build.sh [valkey] [redis]   (both if none is named)
set -euo pipefail

cache="${XDG_CACHE_HOME:-$HOME/.cache}/sluice/servers"
sources=/etc/apt/sources.list.d/sluice-trixie-src.sources
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

series_of() {
  case $1 in
    valkey) echo 8.1 ;;
    redis) echo 8.0 ;;
    *) echo "unknown server: $1 (valkey or redis)" >&2 && return 2 ;;
  esac
}

# The cached directory of <name> <series>, if any (the newest patch release).
cached() { { compgen -G "$cache/$1-$2.*/$1-server" || true; } | sort -V | tail -1 | xargs -r dirname; }

# Source packages only (deb-src): what is installed is not touched.
add_trixie_sources() {
  [ -f "$sources" ] || printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' 'Suites: trixie' \
    'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | as_root tee "$sources" >/dev/null
  as_root apt-get update
}

# build <name> <series>: `build valkey 8.1` leaves valkey-server and valkey-cli in $cache/valkey-8.1.<patch>/.
build() {
  local name=$1 series=$2 src version staged
  mkdir "$work/$name"
  # Only the upstream (orig) tarball is needed, which apt checks against trixie's signed index; apt
  # fails when another file of the package (the .dsc, Debian's patches) is not served, so its own
  # result is not the test.
  (cd "$work/$name" && apt-get source --download-only "$name") || true
  if ! compgen -G "$work/$name/${name}_*.orig.tar.*" >/dev/null; then
    echo "$name: apt-get source did not download the orig tarball" >&2
    return 1
  fi
  tar -xf "$work/$name/$name"_*.orig.tar.* -C "$work/$name"
  src=$(find "$work/$name" -mindepth 1 -maxdepth 1 -type d)
  make -C "$src/src" -j2 MALLOC=libc BUILD_TLS=no "$name-server" "$name-cli"
  version=$("$src/src/$name-server" --version | sed -E 's/.* v=([0-9.]+) .*/\1/')
  if [[ $version != "$series".* ]]; then
    echo "$name: trixie has $version, not $series.x" >&2
    return 1
  fi
  # Moved into place whole, so that a build stopped halfway is never taken for a cached one.
  mkdir -p "$cache"
  staged=$(mktemp -d "$cache/.$name-XXXXXX")
  cp "$src/src/$name-server" "$src/src/$name-cli" "$staged/"
  chmod 755 "$staged"
  mv "$staged" "$cache/$name-$version"
  echo "$name $version: built, $cache/$name-$version"
}

names=("$@")
[ $# -gt 0 ] || names=(valkey redis)
pending=()
for name in "${names[@]}"; do
  series=$(series_of "$name")
  dir=$(cached "$name" "$series")
  if [ -n "$dir" ]; then echo "$name $series: cached, $dir"; else pending+=("$name"); fi
done
[ ${#pending[@]} -gt 0 ] || exit 0
add_trixie_sources
for name in "${pending[@]}"; do build "$name" "$(series_of "$name")"; done
