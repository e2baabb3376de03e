"""docs/transfer_study.md reports the runs of examples/configs/transfer.toml (issue 36 item 3): its results
section is what ``sensorgym ablate`` writes into summary.md from the stored results.csv, so a hand-edited or
stale number fails here; the stored rows are the runs this config plans (the same run ids: the same
sweep, budget, sensors and deployment condition), and the config's pre-registered design is the doc's."""

from __future__ import annotations

import csv
import re

import pytest

from sensorgym.app.ablation import deploy_markdown
from sensorgym.app.ablation.plan import plan_runs
from sensorgym.app.config import load_config

from .common import ROOT

CONFIG = ROOT / "examples" / "configs" / "transfer.toml"
DOC = ROOT / "docs" / "transfer_study.md"
RESULTS = ROOT / "docs" / "data" / "transfer_study_results.csv"
pytest.importorskip("scipy")


@pytest.fixture(autouse=True)
def _from_the_repository_root(monkeypatch):
    """The config's recording and model paths are relative to the working directory, as the doc runs it."""
    monkeypatch.chdir(ROOT)


def _rows() -> list[dict]:
    with RESULTS.open(newline="") as f:
        return list(csv.DictReader(f))


def _generated(doc: str, name: str) -> str:
    match = re.search(rf"<!-- generated: {name} -->\n(.*?)<!-- end -->", doc, flags=re.S)
    assert match, f"docs/transfer_study.md lacks the generated block {name!r}"
    return match.group(1)


def test_the_stored_runs_are_the_ones_the_config_plans():
    cfg = load_config(CONFIG)
    planned = {r.run_id: r for r in plan_runs(cfg)}
    rows = _rows()
    assert sorted(r["run_id"] for r in rows) == sorted(planned)
    for row in rows:
        run = planned[row["run_id"]]
        assert (row["arm"], int(row["seed"]), row["critic"]) == (run.cell["arm"], run.seed, run.critic)
    arms = {r["arm"] for r in rows}
    assert arms == {"a-truth", "b-noise", "c-fitted"}
    assert all(sum(r["arm"] == a for r in rows) >= 5 for a in arms)  # at least 5 seeds per arm


def test_the_results_section_is_what_ablate_writes_from_the_runs():
    cfg = load_config(CONFIG)
    cell_keys = sorted({k for r in plan_runs(cfg) for k in r.cell})
    expected = deploy_markdown(_rows(), cell_keys, cfg)
    assert _generated(DOC.read_text(), "deploy") == expected


def test_a_hand_edited_number_is_caught():
    doc = DOC.read_text()
    block = _generated(doc, "deploy")
    number = re.search(r"\| (-?[\d,]+\.\d) ± ", block).group(1)
    edited = block.replace(f"| {number} ± ", f"| {number}1 ± ", 1)
    cfg = load_config(CONFIG)
    cell_keys = sorted({k for r in plan_runs(cfg) for k in r.cell})
    assert edited != deploy_markdown(_rows(), cell_keys, cfg)


def test_the_pre_registered_design_is_the_configs():
    """The doc states the arms, the metric and the rule as the config fixes them."""
    doc, config = DOC.read_text(), CONFIG.read_text()
    for arm in ("a-truth", "b-noise", "c-fitted"):
        assert f'arm = "{arm}"' in config and f"`{arm}`" in doc
    assert "seeds = [0, 1, 2, 3, 4]" in config
    cfg = load_config(CONFIG)
    assert cfg.algorithm.eval_episodes == 10 and cfg.algorithm.timesteps == 150_000
    assert list(cfg.deploy) == ["real", "trial10"]  # trial10: exploratory, added after the final run
    assert (
        config.index("[deploy.real]")
        < config.index("Exploratory, added after the final run")
        < config.index("[deploy.trial10]")
    )


def test_the_readme_table_holds_the_stored_means():
    """The README's three rows (own condition, real) are the arms' means over the stored runs."""
    readme = (ROOT / "README.md").read_text()
    rows = _rows()
    for arm in ("a-truth", "b-noise", "c-fitted"):
        own = [float(r["eval_return_mean"]) for r in rows if r["arm"] == arm]
        real = [float(r["deploy_real_return_mean"]) for r in rows if r["arm"] == arm]
        assert f"| {sum(own) / len(own):,.1f} | {sum(real) / len(real):,.1f} |" in readme, arm


def test_the_why_table_is_what_the_decomposition_gives():
    """The doc's decomposition table is examples/transfer_decompose.py's, from its stored scores; its real
    column is the study's own (the same runs, the same numbers)."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("decompose", ROOT / "examples" / "transfer_decompose.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    records = json.loads((ROOT / "docs" / "data" / "transfer_study_decomposition.json").read_text())
    assert _generated(DOC.read_text(), "why") == module.table(records)
    real = {(r["arm"], int(r["seed"])): float(r["deploy_real_return_mean"]) for r in _rows()}
    assert {(r["arm"], r["seed"]): r["score"] for r in records if r["part"] == "real"} == real
    assert len(records) == 3 * len(real)
