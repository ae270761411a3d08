#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh machine; idempotent, a few seconds
# when everything is present. Called by `cargo xtask setup` (and so by serve, dist and test).
#   - the wasm32 target (rustup, else Debian's rustc-web with a self-built std), wasm-bindgen-cli at
#     the version in Cargo.lock, wasm-opt (binaryen 132 from npm): scripts/install-wasm-toolchain.sh
#   - Debian's chromium and chromium-driver for the browser tests
#   - the x86_64-pc-windows-gnu target and Debian's MinGW-w64 C compiler: CI checks that the probe
#     builds for Windows (`cargo xtask windows`; ring's build script compiles C for the target)
#   - Debian's brotli and gzip: `cargo xtask dist` precompresses the site's files with them
#   - rustfmt (rustup's component): `cargo xtask test` checks the formatting first
#   - Debian's postgresql server programs: the store tests run on a throwaway PostgreSQL cluster
#     (cargo xtask test makes it with initdb in a temporary directory; no system cluster is made)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-wasm-toolchain.sh --no-trunk Cargo.lock

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi "wenquanyi"; then
  echo "[setup] installing Debian's chromium, chromium-driver and a CJK font (browser tests, screenshots)" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-wqy-zenhei fontconfig >/dev/null
fi
echo "[setup] ok: $(chromium --version 2>/dev/null | head -1); $(chromedriver --version | head -1)" >&2

if ! command -v brotli >/dev/null 2>&1 || ! command -v gzip >/dev/null 2>&1; then
  echo "[setup] installing Debian's brotli and gzip (the site's files are precompressed)" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends brotli gzip >/dev/null
fi

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  echo "[setup] installing Debian's postgresql (the store tests start a throwaway server of their own)" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # Only the programs: the package would otherwise create and start a system-wide cluster.
  $SUDO mkdir -p /etc/postgresql-common
  if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
echo "[setup] ok: $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -1 || command -v initdb)" >&2

if ! cargo fmt --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
  echo "[setup] adding rustfmt (cargo xtask test checks the formatting)" >&2
  rustup component add rustfmt >&2
fi
if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed 2>/dev/null | grep -qx x86_64-pc-windows-gnu; then
  echo "[setup] adding the x86_64-pc-windows-gnu target (the probe's Windows build check)" >&2
  rustup target add x86_64-pc-windows-gnu >&2
fi
if ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1; then
  echo "[setup] installing Debian's MinGW-w64 C compiler (the probe's Windows build check)" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends gcc-mingw-w64-x86-64-posix >/dev/null
fi
