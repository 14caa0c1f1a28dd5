#!/usr/bin/env bash
# Issue 11's GPU checks in one call, sized for one H100/H200 lease (at most 9.5 minutes: 300 s + 270 s limits):
# Llama-3.1-8B decode (XLA vs the Pallas GEMV, fused gate+up, copy rate, plain JAX, per-shape
# tiling sweep), then the NanoGPT-124M train step against torch.compile. JSON and logs go to
# $OUT (the device tool's folder) or benchmarks/results/.
#
#   bash benchmarks/gpu_check.sh                     # on the GPU machine, from the repo root
#   PYTHON=.venv/bin/python bash benchmarks/gpu_check.sh --config tiny   # a dry run on a CPU
#
# The GPU image's python3 has jax, flax, optax, orbax, torch and triton but may hold an older
# protobuf than ttjax.ttml's generated code needs. Then fetch the wheel here first, carry `.whl`:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux2014_x86_64 -d .whl "protobuf>=7.35.1,<8"
set -uo pipefail
PYTHON=${PYTHON:-python3}
out=${OUT:-benchmarks/results}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if ! "$PYTHON" -c "import ttjax.ttml" 2>/dev/null && ls .whl/protobuf-*.whl >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-index --no-deps --target /tmp/site .whl/protobuf-*.whl
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
"$PYTHON" -c "import jax; print(jax.__version__, jax.devices())"
kind=$("$PYTHON" -c "import jax; print(jax.devices()[0].device_kind.replace(' ', '_'))")
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv 2>/dev/null
status=0
timeout 300 "$PYTHON" -m benchmarks.gpu_decode "$@" --json "$out/gpu_decode_$kind.json" \
  2>&1 | tee "$out/gpu_decode_$kind.log" || status=1
timeout 270 "$PYTHON" -m benchmarks.gpu_train "$@" --remat none,full --profile /tmp/ttjax_prof --json "$out/gpu_train_$kind.json" \
  2>&1 | tee "$out/gpu_train_$kind.log" || status=1
exit $status
