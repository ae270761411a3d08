#!/usr/bin/env bash
# Puts the llama.cpp source that the reference runs build on the device into target/llama-src.
# The source comes from the llama-cpp-python source package on the Python registry, which vendors
# llama.cpp's complete tree (0.3.36 vendors commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f).
# Only what a CUDA build of the command-line tools needs is kept (about 25 MB, small enough to
# travel to the device as a `carry` path): the CMake files, ggml with its CPU and CUDA backends,
# the library, common, vendor, gguf-py (the writer write_gguf.py uses) and the tools, the server
# without its web UI's sources (it builds without an embedded UI: LLAMA_USE_PREBUILT_UI=OFF).
#
# On the device (CUDA 13, 16 cores) the build took 4 min 24 s:
# (device.sh builds; it adds llama-server).
set -euo pipefail
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
ROOT="$(cd "$(dirname "$0")/../../../.." && pwd)"
OUT="$ROOT/target/llama-src"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# The source package (77 MB) is fetched from the registry's simple index and checked against its
# pinned digest. (`pip download --no-binary :all:` also builds the package's build tools, CMake
# included, from source just to read its metadata: more than 20 minutes on 2 cores.)
# LLAMA_CPP_SDIST names a copy already downloaded.
SHA256="${LLAMA_CPP_SDIST_SHA256:-832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e}"
SDIST="${LLAMA_CPP_SDIST:-}"
if [ -z "$SDIST" ]; then
  SDIST="$WORK/llama_cpp_python-$VERSION.tar.gz"
  python3 - "$VERSION" "$SDIST" <<'PY'
import re, sys, urllib.request
version, out = sys.argv[1], sys.argv[2]
index = urllib.request.urlopen("https://pypi.org/simple/llama-cpp-python/", timeout=60).read().decode()
name = f"llama_cpp_python-{version}.tar.gz"
url = next(u for u in re.findall(r'href="([^"]+)"', index) if u.split("#")[0].endswith("/" + name))
with urllib.request.urlopen(url.split("#")[0], timeout=600) as r, open(out, "wb") as f:
    while chunk := r.read(1 << 20):
        f.write(chunk)
PY
fi
echo "$SHA256  $SDIST" | sha256sum -c --quiet - || { echo "the source package's digest differs from the pinned one" >&2; exit 1; }
tar -xzf "$SDIST" -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
rm -rf "$OUT"
mkdir -p "$OUT/tools"
cp -r "$SRC"/{CMakeLists.txt,CMakePresets.json,LICENSE,cmake,ggml,src,common,include,vendor,gguf-py} "$OUT/"
for d in "$SRC"/tools/*; do
  case "$(basename "$d")" in ui) ;; *) cp -r "$d" "$OUT/tools/" ;; esac
done
rm -rf "$OUT/tools/server/tests" "$OUT/tools/server/bench"
mkdir -p "$OUT/tools/ui" "$OUT/scripts"
cp "$SRC"/tools/ui/{CMakeLists.txt,ui.cpp.in,ui.h.in,sources.cmake} "$OUT/tools/ui/"
cp "$SRC"/scripts/ui-assets.cmake "$OUT/scripts/"
# Backends other than the CPU and CUDA ones are never built here.
for b in virtgpu cann openvino webgpu et metal hexagon sycl vulkan opencl zdnn rpc; do
  rm -rf "$OUT/ggml/src/ggml-$b"
done
echo "llama.cpp from llama-cpp-python $VERSION in $OUT ($(du -sh "$OUT" | cut -f1))"
