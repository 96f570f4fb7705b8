#!/usr/bin/env bash
# Prepares gpu-carry/ (ignored by git): the Debian 12 .deb files of every
# library the build needs beyond a bare GPU machine's toolchain and torch wheel
# (headers, CMake and pkg-config files, the shared libraries they link), so
# that scripts/gpu-check.sh builds there with no network and no -dev packages.
# Name it in the device call's carry list: run(carry=["gpu-carry"], ...).
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY="${1:-gpu-carry}"

# The -dev packages of scripts/setup.sh (less the toolchain, clang and the
# fuzzers), their runtime libraries, and Debian's pkgconf to read their .pc files.
PACKAGES=(
  libgloo-dev
  libboost1.74-dev
  libyaml-cpp-dev libyaml-cpp0.7
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  nlohmann-json3-dev libcli11-dev
  libginac-dev libginac11 libcln-dev libcln6 libgmp-dev libgmpxx4ldbl libreadline8
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libutf8proc-dev libutf8proc2
  libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 libbrotli-dev libbrotli1
  libsnappy-dev libsnappy1v5 libzstd-dev zlib1g-dev
  libdlpack-dev
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  pkgconf pkgconf-bin libpkgconf3
)

rm -rf "$CARRY"
mkdir -p "$CARRY/debs"
if ! (cd "$CARRY/debs" && apt-get download "${PACKAGES[@]}" >/dev/null 2>&1); then
  apt-get update -qq
  (cd "$CARRY/debs" && apt-get download "${PACKAGES[@]}" >/dev/null)
fi
size_kb=$(du -sk "$CARRY" | cut -f1)
echo "gpu-carry: ${#PACKAGES[@]} packages, $((size_kb / 1024)) MiB in $CARRY/"
if ((size_kb > 40 * 1024)); then
  echo "gpu-carry: over the 40 MiB a device call carries" >&2
  exit 1
fi
