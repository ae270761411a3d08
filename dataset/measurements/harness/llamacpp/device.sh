#!/usr/bin/env bash
# Builds llama.cpp (target/llama-src, from prepare-source.sh) for the device's GPU once per machine,
# then runs the reference cases: bash device.sh [run.py arguments…]. Results go to $OUT.
# The device tool call that ran the committed results (carry: ["target/llama-src"]):
#   bash dataset/measurements/harness/llamacpp/device.sh --group small --deadline 300
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"
SRC="$ROOT/target/llama-src"
BUILD=/tmp/llama-build
OUT="${OUT:-$ROOT/target/llamacpp-out}"
mkdir -p "$OUT"
if [ ! -x "$BUILD/bin/llama-server" ]; then
  t=$(date +%s)
  cmake -S "$SRC" -B "$BUILD" -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1
  cmake --build "$BUILD" -j "$(nproc)" --target llama-completion llama-fit-params llama-quantize llama-server >> "$OUT/build.log" 2>&1 \
    || { tail -50 "$OUT/build.log"; exit 1; }
  echo "built llama.cpp in $(( $(date +%s) - t )) s"
fi
# Model files live in memory when /dev/shm is large enough (the MoE file is 32 GB), else on disk.
MODELS=/tmp/models
if [ "$(df --output=avail -B1G /dev/shm | tail -1)" -ge 48 ]; then MODELS=/dev/shm/models; fi
df -h /dev/shm /tmp | tail -2
export PYTHONUNBUFFERED=1
python3 "$HERE/run.py" --bin "$BUILD/bin" --src "$SRC" --models "$MODELS" \
  --out "$OUT/llamacpp.jsonl" --files "$OUT/files.jsonl" "$@"
