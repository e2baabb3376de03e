#!/usr/bin/env bash
# One short CUDA check (issue 16.5): the CUDA tests, then the standard suite on CUDA at three batch sizes.
# Run on a machine with a CUDA GPU, from the repository root, in a venv with sensorgym installed:
#     bash benchmarks/gpu_check.sh [OUT_DIR]
# Takes a few minutes. Writes OUT_DIR/gpu_tests.txt and OUT_DIR/performance_cuda.md (+ .json/.png); paste
# the tables into docs/performance.md with the GPU's name (OUT_DIR/gpu.txt).
set -uo pipefail
out="${1:-${OUT:-benchmarks/results_gpu}}"
mkdir -p "$out"
python - <<'PY' | tee "$out/gpu.txt"
import torch
assert torch.cuda.is_available(), "no CUDA device: this script is for a GPU machine"
print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu_check: no usable CUDA device; nothing run"; exit 1; }
# every test that exercises CUDA (they skip on CPU-only machines, so -rs shows whether they really ran)
# (-m "cuda or not slow": the CUDA-marked tests and the device-named ones of the default run)
timeout 300 python -m pytest -q -rs -m "cuda or not slow" -k "cuda or device or capture" \
    tests/core/test_manager.py tests/core/test_accel.py tests/wrappers/test_torch_env.py \
    tests/envs/test_batched_pendulum.py tests/wrappers/test_device_mask.py tests/core/test_raw_copy_fold.py \
    tests/sensors/test_imu_mount_randomization.py 2>&1 | tee "$out/gpu_tests.txt"
tests_rc=${PIPESTATUS[0]}
# the suite on CUDA (eager, captured CUDA graph, the Isaac-Lab-style baseline, the copy roofline)
timeout 420 python benchmarks/run_all.py --devices cuda --sizes 16 1024 16384 --min-time 0.3 --out "$out" \
    2>&1 | tee "$out/run_all.txt"
bench_rc=${PIPESTATUS[0]}
echo "tests rc=$tests_rc, benchmark rc=$bench_rc"
exit $(( tests_rc != 0 || bench_rc != 0 ))
