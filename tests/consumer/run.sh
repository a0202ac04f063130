#!/usr/bin/env bash
# Installs the convbank build tree $1 into a temporary prefix, then configures, builds and runs
# tests/consumer against that prefix only: proof that find_package(convbank) works for users.
#
#   bash tests/consumer/run.sh build-tests
set -euo pipefail

if [[ $# -ne 1 || ! -d "$1" ]]; then
  echo "usage: $0 <convbank build directory>" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/convbank-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt"; }
build_type=$(cache_value CMAKE_BUILD_TYPE)
generator=()
if command -v ninja > /dev/null; then generator=(-G Ninja); fi
# A sanitized static library needs the sanitizer runtimes in the consumer's link too.
flags=()
case "$(cache_value CONVBANK_SANITIZE)" in
  ON | TRUE | 1) flags=(-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined) ;;
esac

cmake --install "$build_dir" --prefix "$tmp/prefix" > "$tmp/install.log"
cmake -S "$here" -B "$tmp/build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE="${build_type:-Release}" \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON "${flags[@]}" > "$tmp/configure.log" ||
  { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
"$tmp/build/consumer"
