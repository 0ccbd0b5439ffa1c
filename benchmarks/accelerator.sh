#!/usr/bin/env bash
# The accelerator check (issue 30, item 4) on a lent GPU machine, in one call
# of the device tool. See benchmarks/accelerator/__init__.py for what it measures.
#
# 1. On the development machine, once, from the repository root (needs pip
#    and the package registry):
#
#        bash benchmarks/accelerator.sh prepare
#
#    downloads the wheels the GPU machine lacks for its Python 3.12 (Keras,
#    and namex and optree, the two of Keras' dependencies its image does not
#    hold; it has no TensorFlow and cannot carry one) into .whl/, which git
#    ignores (.git/info/exclude).
#
# 2. The device tool's `run`, with carry [".whl"] and timeout_s 540:
#
#        bash benchmarks/accelerator.sh
#
#    installs the wheels into /tmp/site, records nvidia-smi, and runs
#    `python3 -m benchmarks.accelerator --backends torch,jax --budget 450`
#    (one process per backend, sharing the 450 s; torch first: eager, it
#    compiles nothing and leaves time over, which passes to JAX). It leaves
#    in $OUT: accelerator_torch.json, accelerator_jax.json, accelerator_journal.md (a
#    draft entry of benchmarks/results/JOURNAL.md), accelerator.log and
#    nvidia_smi.txt.
#
# Arguments after the command go to the script and win over these defaults
# (e.g. `bash benchmarks/accelerator.sh --budget 300 --backends jax`).
# Without $OUT (off the device machine) the files go to bench_results/accelerator/.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

PY=${PYTHON:-python3}
# The project's Keras, and the dependencies of it that the nvidia-h200 image
# lacks (/work/.library/device/KINDS.md lists what it holds: absl-py, h5py,
# ml-dtypes, numpy, packaging, rich are there).
WHEELS=(keras==3.15.1 namex==0.1.0 optree==0.20.0)

if [ "${1:-}" = prepare ]; then
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$exclude")"
    grep -qxF '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
    mkdir -p .whl
    "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${WHEELS[@]}" || exit 1
    ls -l .whl
    exit 0
fi

OUT=${OUT:-bench_results/accelerator}
mkdir -p "$OUT"
if ! "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('keras') is None)"; then
    ls .whl/*.whl >/dev/null 2>&1 || { echo "no keras and no .whl/: run 'bash benchmarks/accelerator.sh prepare' here, then carry .whl"; exit 1; }
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
{ nvidia-smi && nvidia-smi --format=csv \
    --query-gpu=name,memory.total,memory.used,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw
} >"$OUT/nvidia_smi.txt" 2>&1 || echo "nvidia-smi: not available" >>"$OUT/nvidia_smi.txt"
tail -n 2 "$OUT/nvidia_smi.txt"
"$PY" -m benchmarks.accelerator --backends torch,jax --budget 450 --output "$OUT/accelerator_{backend}.json" \
    --journal "$OUT/accelerator_journal.md" "$@" 2>&1 | tee "$OUT/accelerator.log"
