"""benchmarks/bench_fit.py can fail (issue 27 audit item 7): it exits 1 when `sensorgym fit` misses its
target, 0 when it meets it, and its table holds the baselines measured in the same run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_fit.py"


@pytest.mark.slow
def test_the_benchmark_fails_when_the_target_is_missed(tmp_path):
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("bench_fit", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    code, table = bench.run(minutes=0.5, folder=tmp_path, target=0.01)  # no fit takes 10 ms
    assert code == 1 and "missed" in table
    assert "baseline: numpy.loadtxt of the CSV" in table and "| **sensorgym fit, all** |" in table
    assert "CPU / reading the CSV" in table
    code, table = bench.run(minutes=0.5, folder=tmp_path, target=1e4)
    assert code == 0 and "missed" not in table
