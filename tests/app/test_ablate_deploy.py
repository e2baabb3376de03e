"""Issue 36 item 2 on real runs: ``sensorgym ablate`` with a ``[deploy.real]`` condition trains two arms
(symmetric and asymmetric critic, 2 seeds each) on the tiny Pendulum config, keeps every run as a run
directory, and scores each under the condition on its own evaluation episodes. The score is checked
against the independent route (``sensorgym eval RUN --config`` a config written by hand with the
overrides), the summary against scipy's t-interval computed here, and resuming after a condition is
added, changed or interrupted against what it must do: score, not train."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

from sensorgym.app.cli import main

from .common import ci, rows, sensorgym_here, t_interval, tiny_toml

#: 1 level x 2 critics x 2 seeds = 4 runs of the tiny config (256 steps, 2 evaluation episodes)
SWEEP = '[sweep]\nseeds = [0, 1]\ncritic = ["symmetric", "asymmetric"]\n'
#: the deployment condition: a noisier angle and an action latency the training never had
REAL = '[deploy.real]\n"sensors.angle.noise" = 0.3\n"latency.delay" = 0.05\n'
#: the study's config
STUDY = tiny_toml(timesteps=256, eval_episodes=2, extra=SWEEP + REAL)
#: the same condition written by hand as a whole config: the tiny one with noise 0.3 and a [latency] table
DEPLOYED = tiny_toml(timesteps=256, eval_episodes=2).replace("noise = 0.05", "noise = 0.3") + (
    "[latency]\ndelay = 0.05\n"
)
ARGS = ("--workers", "1", "--threads", "1", "--no-progress")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """The finished study (copied per test that changes it)."""
    folder = tmp_path_factory.mktemp("deploy")
    (folder / "study.toml").write_text(STUDY)
    proc = sensorgym_here(folder, "ablate", "--config", "study.toml", "--out", "ab", *ARGS)
    assert proc.returncode == 0, proc.stderr
    (folder / "log.txt").write_text(proc.stdout)
    return folder


def _copy(study: Path, tmp_path: Path) -> Path:
    shutil.copytree(study / "ab", tmp_path / "ab")
    shutil.copy2(study / "study.toml", tmp_path / "study.toml")
    return tmp_path


def _results(folder: Path) -> list[dict]:
    return rows(folder / "ab" / "results.csv")


def _result(folder: Path, run_id: str) -> dict:
    return json.loads((folder / "ab" / "runs" / run_id / "result.json").read_text())


def test_each_run_gets_a_column_per_condition_and_its_scores_in_result_json(study):
    with (study / "ab" / "results.csv").open() as f:
        header = next(csv.reader(f))
    assert header[-1] == "deploy_real_return_mean" and header.count("deploy_real_return_mean") == 1
    table = _results(study)
    assert sorted((r["critic"], r["seed"]) for r in table) == [
        ("asymmetric", "0"), ("asymmetric", "1"), ("symmetric", "0"), ("symmetric", "1"),
    ]  # fmt: skip
    assert sorted(p.name for p in (study / "ab" / "runs").iterdir()) == sorted(r["run_id"] for r in table)
    for row in table:
        run_dir = study / "ab" / "runs" / row["run_id"]
        assert sorted(p.name for p in run_dir.iterdir()) == [
            "config.json", "model.zip", "result.json", "vecnormalize.pkl",
        ]  # fmt: skip
        result = _result(study, row["run_id"])
        real = result["deploy"]["real"]
        assert float(row["deploy_real_return_mean"]) == real["eval_return_mean"]
        assert float(row["eval_return_mean"]) == result["eval_return_mean"]
        assert real["overrides"] == {"sensors.angle.noise": 0.3, "latency.delay": 0.05}
        # the same episodes as the run's own score: its evaluation seed, its episode count
        assert real["eval_seed"] == result["eval_seed"] == 10_000 + int(row["seed"])
        assert real["eval_episodes"] == result["eval_episodes"] == len(real["eval_returns"]) == 2
        assert real["eval_return_mean"] == pytest.approx(sum(real["eval_returns"]) / 2, rel=1e-12)
        # the run directory's config is the run's own: its critic and seed, no sweep or deployment
        saved = json.loads((run_dir / "config.json").read_text())
        assert saved["critic"]["type"] == row["critic"] and saved["algorithm"]["seed"] == int(row["seed"])
        assert "sweep" not in saved and "deploy" not in saved
    # the condition changes what the policy meets: not every run scores the same under it
    assert any(float(r["deploy_real_return_mean"]) != float(r["eval_return_mean"]) for r in table)
    log = (study / "log.txt").read_text()
    assert "; deployed: real " in log
    assert "ab/deploy.png" in log and "a run directory per run in ab/runs" in log
    import matplotlib.image

    assert matplotlib.image.imread(study / "ab" / "deploy.png").shape[1] >= 1000


def test_the_deployed_score_is_what_sensorgym_eval_gives_under_the_overrides(study, tmp_path):
    """The independent route: the run directory replayed by `sensorgym eval --config` with a config that
    holds the condition's values written out by hand."""
    from sensorgym.app.config import load_config
    from sensorgym.app.scoring import evaluate_saved

    (tmp_path / "deployed.toml").write_text(DEPLOYED)
    deployed = load_config(tmp_path / "deployed.toml")
    table = _results(study)
    first = next(r for r in table if r["critic"] == "symmetric" and r["seed"] == "0")
    run_dir = study / "ab" / "runs" / first["run_id"]
    real = _result(study, first["run_id"])["deploy"]["real"]
    proc = sensorgym_here(study, "eval", str(run_dir), "--config", str(tmp_path / "deployed.toml"))
    assert proc.returncode == 0, proc.stderr
    assert f"score {real['eval_return_mean']:.1f} = mean return of 2 episodes" in proc.stdout
    assert "evaluation seed 10000" in proc.stdout
    # episode by episode, exactly, for a run of each arm
    assert evaluate_saved(run_dir, deployed)["eval_returns"] == real["eval_returns"]
    second = next(r for r in table if r["critic"] == "asymmetric" and r["seed"] == "1")
    other = study / "ab" / "runs" / second["run_id"]
    assert (
        evaluate_saved(other, deployed)["eval_returns"]
        == _result(study, second["run_id"])["deploy"]["real"]["eval_returns"]
    )
    # and without --config the run directory reproduces the run's own score: it holds the trained model
    assert evaluate_saved(run_dir)["eval_returns"] == _result(study, first["run_id"])["eval_returns"]


def test_the_summary_gives_the_drop_and_the_paired_difference_with_scipys_interval(study):
    table = _results(study)
    own = {(r["critic"], int(r["seed"])): float(r["eval_return_mean"]) for r in table}
    real = {(r["critic"], int(r["seed"])): float(r["deploy_real_return_mean"]) for r in table}
    text = (study / "ab" / "summary.md").read_text()
    section = text.split("## Scored where it will be deployed")[1]
    for critic in ("symmetric", "asymmetric"):
        drop = t_interval([own[(critic, s)] - real[(critic, s)] for s in (0, 1)])
        (line,) = [x for x in section.splitlines() if x.startswith(f"| {critic} | 2 |")]
        assert line.endswith(f"| {ci(*drop)} |"), line
    best, other = sorted(("symmetric", "asymmetric"), key=lambda c: -(real[(c, 0)] + real[(c, 1)]))
    diff = t_interval([real[(best, s)] - real[(other, s)] for s in (0, 1)])
    assert f"### Under real: {best} against each other arm" in section
    assert f"| {other} | {(real[(other, 0)] + real[(other, 1)]) / 2:,.1f} | {ci(*diff)} | 2 |" in section
    (verdict,) = [x for x in section.splitlines() if x.startswith("- Under real")]
    if diff[1] > 0:
        assert f"{best} transfers best" in verdict and f"by {ci(*diff)}" in verdict, verdict
    else:
        assert f"{best} scores highest" in verdict and "cannot be told apart" in verdict, verdict
        assert f"{other}: {ci(*diff)} (95% paired t-interval, n = 2 seeds" in verdict, verdict


def _snapshot_models(folder: Path) -> dict[str, bytes]:
    return {p.parent.name: p.read_bytes() for p in (folder / "ab" / "runs").glob("*/model.zip")}


OWN_COLUMNS = ("eval_return_mean", "eval_returns", "timesteps", "train_seconds", "deploy_real_return_mean")


def test_a_condition_added_later_scores_the_finished_runs_without_training_them(study, tmp_path):
    folder = _copy(study, tmp_path)
    before, models = _results(folder), _snapshot_models(folder)
    # a condition the same as the training: its scores must be the runs' own, episode for episode
    same = '[deploy.same]\n"sensors.angle.noise" = 0.05\n'
    (folder / "more.toml").write_text(STUDY + same)
    proc = sensorgym_here(folder, "ablate", "--config", "more.toml", "--out", "ab", *ARGS)
    assert proc.returncode == 0, proc.stderr
    assert "4 already in ab/results.csv, 0 to run" in proc.stdout
    assert "4 finished run(s) lack a score under a [deploy] condition" in proc.stdout
    assert proc.stdout.count("scored under [deploy] only") == 4 and "s of training" not in proc.stdout
    after = _results(folder)
    assert _snapshot_models(folder) == models  # not one model trained again
    assert [r["run_id"] for r in after] == [r["run_id"] for r in before]
    for old, new in zip(before, after, strict=True):
        assert {k: new[k] for k in OWN_COLUMNS} == {k: old[k] for k in OWN_COLUMNS}
        assert new["deploy_same_return_mean"] == new["eval_return_mean"]
        result = _result(folder, new["run_id"])
        assert result["deploy"]["same"]["eval_returns"] == result["eval_returns"]
    assert "- **same**: `sensors.angle.noise` = 0.05" in (folder / "ab" / "summary.md").read_text()
    # run again: nothing to do
    proc = sensorgym_here(folder, "ablate", "--config", "more.toml", "--out", "ab", *ARGS)
    assert "4 already in ab/results.csv, 0 to run" in proc.stdout and "lack a score" not in proc.stdout
    # a condition whose overrides change under the same name is scored again, under the new ones
    (folder / "changed.toml").write_text(STUDY.replace('noise" = 0.3', 'noise" = 0.6') + same)
    proc = sensorgym_here(folder, "ablate", "--config", "changed.toml", "--out", "ab", *ARGS)
    assert "4 finished run(s) lack a score" in proc.stdout, proc.stdout
    for row in _results(folder):
        real = _result(folder, row["run_id"])["deploy"]["real"]
        assert real["overrides"]["sensors.angle.noise"] == 0.6
        assert float(row["deploy_real_return_mean"]) == real["eval_return_mean"]
    assert _snapshot_models(folder) == models


def test_a_finished_row_without_its_run_directory_is_trained_again(study, tmp_path):
    """A study of an older version (rows, no run directories): the run a condition needs is trained
    again, with its seed, and its row replaced; the other runs are only scored."""
    folder = _copy(study, tmp_path)
    before = {r["run_id"]: r for r in _results(folder)}
    gone = sorted(before)[0]
    shutil.rmtree(folder / "ab" / "runs" / gone)
    proc = sensorgym_here(folder, "ablate", "--config", "study.toml", "--out", "ab", *ARGS)
    assert proc.returncode == 0, proc.stderr
    assert "3 already in ab/results.csv, 1 to run" in proc.stdout
    assert "1 finished run(s) lack a score under a [deploy] condition and have no saved model" in proc.stdout
    assert proc.stdout.count("s of training; deployed: real") == 1, proc.stdout
    after = {r["run_id"]: r for r in _results(folder)}
    assert len(after) == 4 and (folder / "ab" / "runs" / gone / "model.zip").is_file()
    # seeded, one torch thread: the same run again, to the episode
    assert after[gone]["eval_returns"] == before[gone]["eval_returns"]
    assert after[gone]["deploy_real_return_mean"] == before[gone]["deploy_real_return_mean"]


def test_ctrl_c_while_scoring_keeps_every_score_made_and_resumes(study, tmp_path, monkeypatch):
    from sensorgym.app import scoring
    from sensorgym.app.ablation import SweepInterrupted, run_sweep
    from sensorgym.app.config import load_config

    folder = _copy(study, tmp_path)
    (folder / "more.toml").write_text(STUDY + '[deploy.lab]\n"latency.delay" = 0.1\n')
    cfg = load_config(folder / "more.toml")
    real_evaluate, calls = scoring.evaluate_saved, []

    def stopped_on_the_third(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 3:
            raise KeyboardInterrupt  # what Ctrl-C raises in the main thread, here mid-way through scoring
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(scoring, "evaluate_saved", stopped_on_the_third)
    with pytest.raises(SweepInterrupted) as info:
        run_sweep(cfg, folder / "ab", workers=1, threads=1, progress=False, log=lambda line: None)
    assert info.value.done == 4  # every finished run is still in results.csv
    scored = [r for r in _results(folder) if r.get("deploy_lab_return_mean")]
    assert len(scored) == 2  # the two scored before the stop, kept in the CSV and in result.json
    for row in scored:
        assert (
            float(row["deploy_lab_return_mean"])
            == _result(folder, row["run_id"])["deploy"]["lab"]["eval_return_mean"]
        )
    monkeypatch.setattr(scoring, "evaluate_saved", real_evaluate)
    lines: list[str] = []
    run_sweep(cfg, folder / "ab", workers=1, threads=1, progress=False, log=lines.append)
    assert "2 finished run(s) lack a score" in lines[1]
    assert all(r["deploy_lab_return_mean"] for r in _results(folder))
    assert sum(len(_result(folder, r["run_id"])["deploy"]) == 2 for r in _results(folder)) == 4


def test_a_row_a_worker_left_for_a_finished_run_replaces_its_row(tmp_path):
    """Worker processes hand rows over through ``.finished``; a row of a run the CSV already holds (a
    finished run scored under a new condition) replaces that row instead of adding a second one, and a
    new column keeps every value of the rows already there."""
    from sensorgym.app.ablation.run import _collect_finished, _save_row

    csv_path = tmp_path / "results.csv"
    fields = ["run_id", "critic", "seed", "eval_return_mean"]
    _save_row(csv_path, {"run_id": "a", "critic": "symmetric", "seed": 0, "eval_return_mean": -1.5}, fields)
    _save_row(csv_path, {"run_id": "b", "critic": "symmetric", "seed": 1, "eval_return_mean": -2.5}, fields)
    (tmp_path / ".finished").mkdir()
    scored = {"run_id": "a", "critic": "symmetric", "seed": 0, "eval_return_mean": -1.5}
    (tmp_path / ".finished" / "a.json").write_text(json.dumps({**scored, "deploy_real_return_mean": -9.0}))
    collected = _collect_finished(tmp_path, csv_path, [*fields, "deploy_real_return_mean"])
    assert [r["run_id"] for r in collected] == ["a"] and not list((tmp_path / ".finished").iterdir())
    assert rows(csv_path) == [
        {"run_id": "a", "critic": "symmetric", "seed": "0", "eval_return_mean": "-1.5",
         "deploy_real_return_mean": "-9.0"},
        {"run_id": "b", "critic": "symmetric", "seed": "1", "eval_return_mean": "-2.5",
         "deploy_real_return_mean": ""},
    ]  # fmt: skip


@pytest.mark.slow
def test_workers_and_ray_score_a_condition_added_later(study, tmp_path):
    """The same scores from worker processes (the rows come back through .finished) and from Ray tasks (the
    run directory travels to the task and back), without training."""
    folder = _copy(study, tmp_path)
    models = _snapshot_models(folder)
    (folder / "more.toml").write_text(STUDY + '[deploy.lab]\n"latency.delay" = 0.1\n')
    shutil.copytree(folder / "ab", folder / "ray")
    proc = sensorgym_here(folder, "ablate", "--config", "more.toml", "--out", "ab", "--workers", "2",
                          "--threads", "1", "--no-progress")  # fmt: skip
    assert proc.returncode == 0 and "4 finished run(s) lack a score" in proc.stdout, proc.stderr
    by_workers = {r["run_id"]: r["deploy_lab_return_mean"] for r in _results(folder)}
    assert all(by_workers.values()) and _snapshot_models(folder) == models
    ray = pytest.importorskip("ray")
    try:
        code = main(["ablate", "--config", str(folder / "more.toml"), "--out", str(folder / "ray"),
                     "--ray", "local", "--no-progress"])  # fmt: skip
    finally:
        ray.shutdown()
    assert code == 0
    assert {
        r["run_id"]: r["deploy_lab_return_mean"] for r in rows(folder / "ray" / "results.csv")
    } == by_workers
    for run_id in by_workers:
        assert "lab" in json.loads((folder / "ray" / "runs" / run_id / "result.json").read_text())["deploy"]
