#!/usr/bin/env bash
# DeepSpeed's ZeRO reference runs (multigpu.py's zero* modes). The device has no network, so the
# packages travel with the tree:
#   bash deepspeed.sh download DIR       here: DeepSpeed 0.19.6 (source) and its dependencies'
#                                        wheels for CPython 3.12 on x86_64 Linux into DIR
#   bash deepspeed.sh run DIR OUT.jsonl  on the device: install them (torch is already there), then
#                                        every zero* case of multigpu.py, appended to OUT.jsonl
#   bash deepspeed.sh experiments DIR OUT.jsonl
#                                        the same for multigpu.py's EXPERIMENTS (ids with `key=value`:
#                                        non-default settings), whose lines go to ../experiments/
set -euo pipefail
cmd=${1:?download DIR | run DIR OUT.jsonl | experiments DIR OUT.jsonl}
dir=${2:?a folder for the packages}
case "$cmd" in
  download)
    mkdir -p "$dir"
    pip download deepspeed==0.19.6 --no-deps --no-binary :all: -d "$dir"
    pip download hjson einops msgpack ninja py-cpuinfo nvidia-ml-py "pydantic>=2" --only-binary=:all: \
      --python-version 3.12 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$dir"
    ;;
  run | experiments)
    out=$(realpath -m "${3:?OUT.jsonl}")
    # No compiled DeepSpeed ops: the runs use torch's AdamW (on the CPU when offloaded).
    DS_BUILD_OPS=0 python3 -m pip install -q --no-index --find-links "$dir" --no-build-isolation deepspeed
    cd "$(dirname "$0")"
    if [ "$cmd" = run ]; then pick='$1 ~ /^zero/ && $1 !~ /=/'; else pick='$1 ~ /^zero/ && $1 ~ /=/'; fi
    mapfile -t ids < <(python3 multigpu.py --list | awk "$pick {print \$1}")
    args=()
    for id in "${ids[@]}"; do args+=(--only "$id"); done
    python3 multigpu.py --out "$out" "${args[@]}"
    ;;
  *) echo "unknown command $cmd (download | run | experiments)" >&2; exit 2 ;;
esac
