"""What the commands report: the ablation's ``summary.md`` and plot answer the question with their
uncertainty; a trained run has one final score that ``sensorgym eval`` reproduces; step counts are the steps
actually trained, with the reason they exceed the budget; the clean-train / noisy-eval config pair works;
``inspect`` shows configured beside estimated values; ``demo`` prints signed differences."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from sensorgym.app.ablation import paired_difference, results_figure, summary_markdown, t_quantile
from sensorgym.app.cli import main
from sensorgym.app.config import load_config, parse_config
from sensorgym.app.demo import demo_traces, run_demo

from .common import tiny_toml

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "examples" / "configs"

SWEEP_CFG = parse_config(
    {
        "env": {"id": "Pendulum-v1", "n_envs": 4},
        "sensors": {"angle": {"type": "StateSensorOptions", "key": "obs", "index": [0, 1]}},
        "algorithm": {"timesteps": 50_000, "eval_episodes": 4},
        "sweep": {"seeds": [0, 1, 2], "grid": {"sensors.angle.noise": [0.0, 0.2]}},
    }
)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may land in the working directory of the test run


def _row(noise: float, critic: str, seed: int, episodes: list[float]) -> dict:
    return {
        "run_id": f"{noise}-{critic}-{seed}",
        "critic": critic,
        "seed": str(seed),
        "sensors.angle.noise": str(noise),
        "eval_return_mean": str(float(np.mean(episodes))),
        "eval_return_std": str(float(np.std(episodes, ddof=1))),
        "eval_episodes": str(len(episodes)),
        "eval_returns": " ".join(str(x) for x in episodes),
        "timesteps": "53248",
        "timesteps_budget": "50000",
    }


# noise 0.0: asymmetric better by 100 on every seed (+-5); noise 0.2: no consistent difference
SCORES = {
    (0.0, "symmetric"): [-600.0, -500.0, -700.0],
    (0.0, "asymmetric"): [-495.0, -405.0, -595.0],
    (0.2, "symmetric"): [-800.0, -700.0, -900.0],
    (0.2, "asymmetric"): [-850.0, -650.0, -905.0],
}
SPREAD = [-30.0, -10.0, 10.0, 30.0]  # episode returns around each run's score: sd = 25.8 (ddof=1)


def _rows() -> list[dict]:
    return [
        _row(noise, critic, seed, [score + d for d in SPREAD])
        for (noise, critic), scores in SCORES.items()
        for seed, score in enumerate(scores)
    ]


def test_paired_difference_is_a_t_interval_with_sample_sd():
    asym, sym = SCORES[(0.0, "asymmetric")], SCORES[(0.0, "symmetric")]
    d = paired_difference(asym, sym)
    diffs = np.subtract(asym, sym)  # 105, 95, 105
    assert d["mean"] == pytest.approx(diffs.mean())
    assert d["sd"] == pytest.approx(np.std(diffs, ddof=1))  # not np.std's ddof=0
    half = 4.302653 * np.std(diffs, ddof=1) / math.sqrt(3)  # t(0.975, df=2)
    assert (d["lo"], d["hi"]) == pytest.approx((diffs.mean() - half, diffs.mean() + half), rel=1e-5)
    assert t_quantile(0.975, 2) == pytest.approx(4.302653, rel=1e-6)
    assert t_quantile(0.975, 30) == pytest.approx(2.042272, rel=1e-6)
    assert 0 < d["p"] < 0.01


@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_the_statistics_are_scipys(n):
    """The ablation's interval and test are scipy.stats' (they were a hand-written Student-t)."""
    from scipy import stats

    from sensorgym.app.ablation.statistics import ci_half

    rng = np.random.default_rng(n)
    treatment, control = rng.normal(-200, 50, n), rng.normal(-230, 50, n)
    d = paired_difference(treatment, control)
    reference = stats.ttest_rel(treatment, control)
    low, high = reference.confidence_interval(0.95)
    assert (d["lo"], d["hi"], d["p"]) == pytest.approx((low, high, reference.pvalue), rel=1e-12)
    # the same through the textbook formula, with scipy's quantile: mean +- t(0.975, n-1) sd / sqrt(n)
    diffs = treatment - control
    half = stats.t.ppf(0.975, n - 1) * np.std(diffs, ddof=1) / math.sqrt(n)
    assert (d["lo"], d["hi"]) == pytest.approx((diffs.mean() - half, diffs.mean() + half), rel=1e-9)
    lo, hi = stats.t.interval(0.95, n - 1, loc=control.mean(), scale=stats.sem(control))
    assert ci_half(control) == pytest.approx((hi - lo) / 2, rel=1e-12)
    assert t_quantile(0.975, n - 1) == stats.t.ppf(0.975, n - 1)


def test_summary_states_the_answer_per_level_with_its_uncertainty():
    text = summary_markdown(_rows(), ["sensors.angle.noise"], SWEEP_CFG)
    assert text.startswith("# Does an asymmetric critic help? Pendulum-v1, varying sensors.angle.noise")
    # the steps actually trained, and why they differ from the budget
    assert "each run trained 53,248 steps: the budget of 50,000 rounded up to whole PPO rollouts" in text
    answer = text.split("## Answer")[1].split("##")[0]
    sentences = [line for line in answer.splitlines() if line.startswith("- ")]
    assert len(sentences) == 2  # one plain sentence per level
    clear, unclear = sentences
    assert clear.startswith("- At angle noise = 0.0, the asymmetric critic scores higher by 101.7")
    assert "95% CI" in clear and "3 paired seeds" in clear and "evidence" in clear and "helps" in clear
    assert unclear.startswith("- At angle noise = 0.2, no clear difference")
    assert "neither show that it helps nor that it does not" in unclear
    # the table: mean ± sample sd (ddof=1) over seeds, paired difference with CI and p, episode sd
    table = next(line for line in text.splitlines() if line.startswith("| 0.0 |"))
    sd = np.std(SCORES[(0.0, "symmetric")], ddof=1)  # 100.0; np.std (ddof=0) would say 81.6
    assert f"-600.0 ± {sd:.1f} (3)" in table
    d = paired_difference(SCORES[(0.0, "asymmetric")], SCORES[(0.0, "symmetric")])
    assert f"+{d['mean']:.1f} [+{d['lo']:.1f}, +{d['hi']:.1f}]" in table
    assert table.rstrip(" |").endswith(f"{np.std(SPREAD, ddof=1):.1f}")  # episode-level spread
    assert "sample standard deviation over seeds (ddof=1)" in text and "episode sd" in text


def test_summary_calls_a_p_between_5_and_10_percent_a_weak_hint():
    rows = _rows()
    for r in rows:  # noise 0.2: asymmetric better by 50, 100, 150 on the three seeds: p = 0.07
        if r["sensors.angle.noise"] == "0.2" and r["critic"] == "asymmetric":
            sym = SCORES[(0.2, "symmetric")][int(r["seed"])]
            r["eval_return_mean"] = str(sym + [50.0, 100.0, 150.0][int(r["seed"])])
    text = summary_markdown(rows, ["sensors.angle.noise"], SWEEP_CFG)
    line = next(x for x in text.splitlines() if x.startswith("- At angle noise = 0.2"))
    assert "only a weak hint that the asymmetric critic scores higher" in line
    assert "the interval still includes 0" in line


def test_summary_with_one_seed_says_it_is_anecdotal():
    rows = [r for r in _rows() if r["seed"] == "0"]
    text = summary_markdown(rows, ["sensors.angle.noise"], SWEEP_CFG)
    assert text.count("one seed only") == 2 and "anecdotal: run more seeds" in text


def test_plot_has_title_caption_labels_and_a_sane_y_range():
    fig = results_figure(_rows(), ["sensors.angle.noise"], SWEEP_CFG)
    assert fig._suptitle.get_text().startswith("Does an asymmetric critic help? Pendulum-v1")
    assert "53,248 training steps per run" in fig._suptitle.get_text()
    caption = " ".join(t.get_text() for t in fig.texts)
    assert "mean over 3 seeds" in caption and "95% t-interval" in caption
    scores, diffs = fig.axes[0], fig.axes[1]
    for ax in (scores, diffs):
        assert ax.get_xlabel() == "angle noise (sensors.angle.noise)"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0.0", "0.2"]
        assert ax.get_title()
    assert scores.get_ylabel() == "score: mean evaluation return"
    assert diffs.get_ylabel() == "asymmetric - symmetric (same seed)"
    legend = scores.get_legend()
    assert "95% CI" in legend.get_title().get_text()
    # a difference that is small next to the returns stays small: the panel spans >= 25% of the scale
    lo, hi = diffs.get_ylim()
    assert lo < 0 < hi and hi - lo >= 0.25 * 900


def test_a_two_point_difference_is_not_blown_up():
    rows = [
        _row(0.1, critic, seed, [-500.0 + seed + (2.0 if critic == "asymmetric" else 0.0)] * 2)
        for critic in ("symmetric", "asymmetric")
        for seed in range(3)
    ]
    fig = results_figure(rows, ["sensors.angle.noise"], SWEEP_CFG)
    for ax in fig.axes:
        lo, hi = ax.get_ylim()
        assert hi - lo >= 100  # a 2-point difference on returns of -500 spans at most 2% of the panel


# -- train / eval: one final score, reproduced; honest step counts ------------------------------------------
# the shared tiny config, symmetric, with a learning curve, a budget that is not whole rollouts and seed 4
TINY = tiny_toml(
    timesteps=200, eval_episodes=3, eval_every=128, extra='[critic]\ntype = "symmetric"\n'
).replace("eval_every = 128\n", "eval_every = 128\nseed = 4\n")


def test_train_reports_one_final_score_that_eval_reproduces(tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(TINY)
    assert main(["train", "--config", str(cfg), "--out", "run", "--no-progress"]) == 0
    out = capsys.readouterr().out
    # the budget, the rollout, and the steps that will be trained, before training
    assert "budget 200 steps; PPO trains whole rollouts of 2 envs x 64 steps = 128, so 256 steps" in out
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["timesteps"] == 256 and result["timesteps_budget"] == 200 and result["rollout_steps"] == 128
    assert result["eval_episodes"] == 3 and result["eval_seed"] == 10_004
    assert result["eval_return_std"] == pytest.approx(np.std(result["eval_returns"], ddof=1))
    # the learning curve stops before the end, where the final score takes over
    assert [step for step, _ in result["eval_history"]] == [128]
    finals = [line for line in out.splitlines() if line.startswith("final score:")]
    assert len(finals) == 1
    score = f"{result['eval_return_mean']:.1f}"
    assert finals[0].startswith(
        f"final score: {score} = mean return of 3 evaluation episodes (sd {result['eval_return_std']:.1f}), "
        "deterministic policy, evaluation seed 10004, after 256 steps (budget 200, rounded up to whole "
        "rollouts of 128)"
    )
    assert "reproduce it: sensorgym eval run" in out
    assert "config.json" in out and "result.json" in out
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["algorithm"]["timesteps"] == 200 and saved["algorithm"]["seed"] == 4
    # `sensorgym eval RUN_DIR`, by default: the same episodes, the same score
    assert main(["eval", "run"]) == 0
    out = capsys.readouterr().out
    assert f"score {score} = mean return of 3 episodes" in out and "evaluation seed 10004" in out
    assert f"(the final score `sensorgym train` reported: {score}, same episodes and seed)" in out
    from sensorgym.app.training import evaluate_saved

    assert evaluate_saved(tmp_path / "run")["eval_returns"] == result["eval_returns"]
    assert not (tmp_path / "runs").exists()  # nothing outside --out
    # the README lists exactly the files a run directory holds
    listed = _readme_files("`sensorgym train`")
    assert listed == sorted(p.name for p in (tmp_path / "run").iterdir())


def _readme_files(command: str) -> list[str]:
    """The file names the README's command-line table lists in the "writes" column of ``command``."""
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith(f"| {command} "))
    names = re.findall(r"`([\w.]+)/?`", row.split(" | ")[2])
    return sorted(n for n in names if n not in ("sensorgym_outputs",))


def test_ablate_reports_the_steps_actually_trained(tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(
        TINY.replace("eval_every = 128\n", "")
        + '[sweep]\nseeds = [0]\ncritic = ["symmetric"]\ngrid = { "sensors.angle.noise" = [0.1] }\n'
    )
    assert main(["ablate", "--config", str(cfg), "--out", "ab", "--workers", "1", "--no-progress"]) == 0
    log = capsys.readouterr().out
    assert (
        "sweep: 1 runs of 256 steps each (the budget of 200 rounded up to whole PPO rollouts of 128)" in log
    )
    with (tmp_path / "ab" / "results.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["timesteps"] == "256" and row["timesteps_budget"] == "200" and row["eval_episodes"] == "3"
    assert len(row["eval_returns"].split()) == 3
    summary = (tmp_path / "ab" / "summary.md").read_text()
    assert (
        "each run trained 256 steps: the budget of 200 rounded up to whole PPO rollouts of 2 envs x"
        in summary
    )
    assert json.loads((tmp_path / "ab" / "config.json").read_text())["algorithm"]["timesteps"] == 200
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ab", "tiny.toml"]
    written = sorted(p.name for p in (tmp_path / "ab").iterdir() if not p.name.startswith("."))
    assert _readme_files("`sensorgym ablate`") == written


def test_the_shipped_pair_trains_clean_and_evaluates_noisy(tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    train, noisy = load_config(CONFIGS / "train.toml"), load_config(CONFIGS / "eval_noisy.toml")
    clean = train.sensors["angle"]
    assert (clean.noise, clean.delay, clean.jitter) == (0.0, 0.0, 0.0)  # the default trains clean
    test = noisy.sensors["angle"]
    assert test.noise > 0 and test.delay > 0
    assert (test.index, test.history_length, test.key) == (clean.index, clean.history_length, clean.key)
    # a tiny copy of train.toml, then `sensorgym eval <run_dir> --config examples/configs/eval_noisy.toml`
    text = (CONFIGS / "train.toml").read_text()
    text = re.sub(r"timesteps = \d+", "timesteps = 256", text)
    text = re.sub(r"eval_every = \d+", "eval_every = 0", text)
    text = re.sub(r"eval_episodes = \d+", "eval_episodes = 4", text)
    (tmp_path / "train.toml").write_text(text + "kwargs = { n_steps = 64, batch_size = 64, n_epochs = 1 }\n")
    assert main(["train", "--config", "train.toml", "--out", "run", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["eval", "run", "--config", str(CONFIGS / "eval_noisy.toml")]) == 0
    out = capsys.readouterr().out
    assert "under the sensors of" in out and "eval_noisy.toml" in out
    assert "the final score under its training sensors, on the same 4 episodes" in out and "change:" in out
    readme = (ROOT / "README.md").read_text()
    assert "sensorgym eval sensorgym_outputs/train --config examples/configs/eval_noisy.toml" in readme


# -- inspect and demo -------------------------------------------------------------------------------------
def test_inspect_shows_configured_beside_estimated_with_explanations(capsys):
    pytest.importorskip("matplotlib")
    assert main(["inspect", "--steps", "200", "--out", "fig.png"]) == 0
    out = capsys.readouterr().out
    assert "each imperfection as configured and as estimated" in out
    assert re.search(r"angle\[0\]\s+configured\s+estimated\s+verdict", out)
    assert re.search(r"noise std\s+0\.02\s+0\.0\d+ ± ", out)  # configured 0.02 beside its estimate
    assert "quantization (step 0.02) adds up to q/√12" in out  # why the noise estimate is higher
    assert "jitter re-reads samples" in out
    gyro = out.split("\ngyro")[1]
    assert re.search(r"drift at end\s+none\s+", gyro)  # no drift configured: said so beside the estimate
    assert "no random walk is configured" in gyro


def test_inspect_says_a_short_trace_gives_rough_estimates(capsys):
    pytest.importorskip("matplotlib")
    assert main(["inspect", "--steps", "40", "--out", "fig.png"]) == 0
    assert "short trace" in capsys.readouterr().out


def test_demo_prints_signed_differences():
    text = run_demo(steps=13, seed=0)
    gt, measured = demo_traces(12, 0)
    rows = [
        line.split() for line in text.splitlines() if re.match(r"\s*\d+\s+\d+\.\d\d\s+-?\d+\.\d{4}\s", line)
    ]
    assert len(rows) == 13  # --steps 13: the reset (step 0) and 12 control steps
    signs = []
    for row, g, m in zip(rows, gt, measured, strict=True):
        diff = float(row[4])
        assert diff == pytest.approx((m - g).item(), abs=1e-4)
        bar = row[5] if len(row) > 5 else ""
        if diff < -0.0125:  # at least one mark
            assert set(bar) == {"-", "|"} and bar.endswith("|")
        elif diff > 0.0125:
            assert set(bar) == {"+", "|"} and bar.startswith("|")
        signs.append(np.sign(diff))
    assert -1 in signs and 1 in signs  # both signs occur, and are printed as such


def test_a_runs_progress_counts_to_the_steps_it_trains():
    pytest.importorskip("stable_baselines3")
    from sensorgym.app.ablation import plan_runs, run_one

    cfg = parse_config(
        {
            "env": {"id": "Pendulum-v1", "n_envs": 2},
            "sensors": {"angle": {"type": "StateSensorOptions", "key": "obs", "index": [0, 1]}},
            "algorithm": {
                "timesteps": 200,
                "eval_episodes": 1,
                "kwargs": {"n_steps": 64, "batch_size": 64, "n_epochs": 1},
            },
            "sweep": {"seeds": [0], "critic": ["symmetric"]},
        }
    )

    class Channel:
        def __init__(self) -> None:
            self.messages: list[tuple[str, int, int]] = []

        def put(self, message: tuple[str, int, int]) -> None:
            self.messages.append(message)

    channel = Channel()
    (run,) = plan_runs(cfg)
    row = run_one(cfg.raw, run, channel, threads=1)
    assert {total for _, _, total in channel.messages} == {256}  # the bar's total: steps to be trained
    assert channel.messages[-1][1] == 256 == row["timesteps"]  # it ends full, not past or short of it
