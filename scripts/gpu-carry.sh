#!/usr/bin/env bash
# Prepares gpu-carry/ (ignored by git) for scripts/gpu-check.sh on a GPU machine
# that has a toolchain, nvcc and a torch wheel but no network and no Debian
# -dev packages: every library the build needs beyond that, from Debian 12's
# packages (headers, CMake and pkg-config files, the shared libraries they link,
# Debian's pkgconf), unpacked here into one relocatable prefix and packed as
# gpu-carry/debian-prefix.tar.gz. Name it in the device call's carry list:
#   run(command="bash scripts/gpu-check.sh", carry=["gpu-carry"], timeout_s=540)
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY="${1:-gpu-carry}"

# The -dev packages of scripts/setup.sh (less the toolchain, clang and the
# fuzzers), the runtime libraries their libX.so links point to, and Debian's
# pkgconf to read their .pc files.
PACKAGES=(
  libgloo-dev
  libboost1.74-dev
  libyaml-cpp-dev libyaml-cpp0.7
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  nlohmann-json3-dev libcli11-dev
  libginac-dev libginac11 libcln-dev libcln6 libgmp-dev libgmp10 libgmpxx4ldbl libreadline8
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  libutf8proc-dev libutf8proc2
  libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 libbrotli-dev libbrotli1
  libsnappy-dev libsnappy1v5 libzstd-dev libzstd1 zlib1g-dev zlib1g
  libdlpack-dev
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  pkgconf pkgconf-bin libpkgconf3
)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/prefix"
if ! (cd "$work/debs" && apt-get download "${PACKAGES[@]}" >/dev/null 2>&1); then
  if [ "$(id -u)" != 0 ]; then sudo apt-get update -qq; else apt-get update -qq; fi
  (cd "$work/debs" && apt-get download "${PACKAGES[@]}" >/dev/null)
fi
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/prefix"; done
P="$work/prefix"
rm -rf "$P"/usr/share/{doc,man,info,lintian,bug} "$P"/usr/src
# Links to what the build never links: gloo's library (LibTorch carries its
# own; only the headers are used) and snappy's odd static alias.
rm -f "$P"/usr/lib/libgloo.so "$P"/usr/lib/x86_64-linux-gnu/libsnappy-shared.a
# Static archives where the shared library is there too (the build links the
# latter; the check below makes sure each libX.so resolves); GoogleTest and
# Google Benchmark come as archives only.
for a in "$P"/usr/lib/x86_64-linux-gnu/*.a; do
  if [ -e "${a%.a}.so" ]; then rm -f "$a"; fi
done

# Boost's 1.74 headers are 150 MB unpacked; the build includes a few. Keep the
# headers that the sources' own boost includes reach, as the compiler finds them.
includes="$(grep -rhoE '#include <boost/[^>]+>' core plugins sdk tests bench | sort -u || true)"
if [ -n "$includes" ]; then
  keep="$work/boost-keep.txt"
  printf '%s\n' "$includes" | g++ -std=c++17 -M -x c++ - -isystem "$P/usr/include" -o - \
    | tr ' \\' '\n\n' | grep -F "$P/usr/include/boost/" | sed "s|^$P/||" | sort -u >"$keep"
  (cd "$P" && find usr/include/boost -type f | sort | comm -23 - "$keep" | xargs rm -f)
  find "$P/usr/include/boost" -type d -empty -delete
  echo "gpu-carry: boost reduced to the $(wc -l <"$keep") headers the sources reach"
fi

# Absolute links (Debian's /usr/lib/... targets) become relative, so the
# prefix works wherever it is unpacked.
find "$P" -type l -lname '/*' | while read -r link; do
  target="$(readlink "$link")"
  ln -sfn "$(realpath --relative-to="$(dirname "$link")" -m "$P$target")" "$link"
done

# Every link must land inside the prefix: a dangling libX.so means a runtime
# package is missing above, and the linker would look for it on the machine.
dangling="$(find "$P" -xtype l)"
if [ -n "$dangling" ]; then
  echo "gpu-carry: links with no target in the prefix (add their runtime packages):" >&2
  echo "$dangling" | sed "s|^$P/||" >&2
  exit 1
fi

rm -rf "$CARRY"
mkdir -p "$CARRY"
(cd "$work/debs" && ls) >"$CARRY/packages.txt"
tar -C "$P" -czf "$CARRY/debian-prefix.tar.gz" .  # gzip: every machine has it
size_kb=$(du -sk "$CARRY" | cut -f1)
echo "gpu-carry: ${#PACKAGES[@]} Debian packages, $((size_kb / 1024)) MiB in $CARRY/ ($((size_kb)) KiB)"
if ((size_kb > 24 * 1024)); then
  echo "gpu-carry: over 24 MiB: the project and this must travel in 40 MiB" >&2
  exit 1
fi
