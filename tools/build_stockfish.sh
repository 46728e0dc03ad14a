#!/bin/sh
# Builds Stockfish from Debian's source package for this machine's CPU and installs it under a prefix.
#
#   tools/build_stockfish.sh [PREFIX]          # what `make stockfish-native` runs (PREFIX: .stockfish)
#   ARCH=x86-64 tools/build_stockfish.sh       # the generic build Debian ships, for comparison
#   STOCKFISH_VERSION=17-1 STOCKFISH_SUITE=trixie tools/build_stockfish.sh
#
# Debian's binary package is built for a generic CPU (ARCH=x86-64 on amd64); Stockfish's
# ARCH=native picks the best instruction set this CPU has (e.g. x86-64-vnni256 with AVX-512
# VNNI). The source package carries its NNUE networks, so the build downloads nothing else.
# Installs PREFIX/bin/stockfish-<version>-<arch> and prints it: pass it to
# `searchless-annotate --engine_path ...` (the manifest records the binary's sha256).
# Needs: a C++ compiler and make; apt-get with a deb-src entry for STOCKFISH_SUITE (added, when
# missing and run as root, in /etc/apt/sources.list.d/searchless-stockfish-src.list).
set -eu

PREFIX=${1:-$(pwd)/.stockfish}
VERSION=${STOCKFISH_VERSION:-17-1}
SUITE=${STOCKFISH_SUITE:-trixie}
ARCH=${ARCH:-native}
UPSTREAM=${VERSION%-*}
JOBS=$(nproc 2>/dev/null || echo 2)

fail() { echo "error: $*" >&2; exit 2; }
command -v make >/dev/null 2>&1 || fail "make is missing (Debian: apt-get install build-essential)"
command -v g++ >/dev/null 2>&1 || command -v clang++ >/dev/null 2>&1 || fail "no C++ compiler (Debian: apt-get install g++)"
command -v apt-get >/dev/null 2>&1 || fail "apt-get is missing: this script builds from Debian's source package"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
if ! apt-cache showsrc "stockfish=$VERSION" 2>/dev/null | grep -q "^Version: $VERSION\$"; then
  [ "$(id -u)" = 0 ] || fail "no deb-src for stockfish $VERSION: add 'deb-src http://deb.debian.org/debian $SUITE main' to apt's sources (as root)"
  echo "deb-src http://deb.debian.org/debian $SUITE main" > /etc/apt/sources.list.d/searchless-stockfish-src.list
  apt-get update -qq
fi
echo "Fetching the source of stockfish $VERSION ..."
# The .orig tarball (source and networks) and Debian's files are all the build needs; apt may
# fail on a .dsc the mirror no longer has, which is harmless when the tarball arrived.
apt-get source --download-only -qq "stockfish=$VERSION" >/dev/null 2>&1 || true
ORIG=$(ls stockfish_"$UPSTREAM"*.orig.tar.* 2>/dev/null | head -1)
[ -n "$ORIG" ] || fail "could not download stockfish $VERSION's source (apt-get source stockfish=$VERSION)"
tar xf "$ORIG"
SRC=$(ls -d stockfish-*/src | head -1)

echo "Building Stockfish $UPSTREAM, ARCH=$ARCH, $JOBS jobs ..."
make -C "$SRC" -j"$JOBS" build ARCH="$ARCH" >build.log 2>&1 || { tail -20 build.log >&2; fail "build failed (log above)"; }
BUILT=$(sed -n 's/.*-DARCH=\([a-z0-9_-]*\).*/\1/p' build.log | tail -1)
TARGET="$PREFIX/bin/stockfish-$UPSTREAM-${BUILT:-$ARCH}"
mkdir -p "$PREFIX/bin"
install -m 755 "$SRC/stockfish" "$TARGET"
echo "$TARGET"
