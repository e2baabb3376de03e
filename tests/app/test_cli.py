"""The command line end to end, with tiny budgets: inspect, train/eval, ablate (resume, workers, Ray),
and config validation."""

from __future__ import annotations

import csv
import json
import pickle
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
import matplotlib.image

from sensorgym.app.cli import main
from sensorgym.app.config import ConfigError, load_config, parse_config
from sensorgym.app.inspection import run_inspect

from .common import tiny_toml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a default output folder lands in the test's temp dir, not the checkout


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def tiny_config(tmp_path: Path, extra: str = "") -> Path:
    return write(tmp_path / "tiny.toml", tiny_toml(extra="\n" + extra + "\n"))


# -- inspect -----------------------------------------------------------------------------------------------
def test_inspect_writes_a_png_whose_traces_show_the_configured_imperfections(tmp_path, capsys):
    cfg = write(
        tmp_path / "c.toml",
        """
[env]
id = "Pendulum-v1"
[sensors.angle]
type = "StateSensorOptions"
key = "obs"
index = [1]
delay = 0.15
bias = 0.1
noise = 0.01
resolution = 0.05
""",
    )
    out = tmp_path / "fig.png"
    assert main(["inspect", "--config", str(cfg), "--steps", "150", "--out", str(out)]) == 0
    image = matplotlib.image.imread(out)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 300
    printed = capsys.readouterr().out
    assert "angle" in printed and str(out) in printed
    result = run_inspect(load_config(cfg), steps=150)
    row = result.summary[0]
    assert row["delay_steps"] == 3  # 0.15 s at dt = 0.05
    assert row["quantization"] == pytest.approx(0.05)
    assert row["bias"] == pytest.approx(0.1, abs=0.03)
    assert row["noise_std"] == pytest.approx(0.01 + 0.05 / 12**0.5, rel=0.6)  # noise + quantization
    ticks = result.measured[:, 0] / 0.05
    np.testing.assert_allclose(ticks, np.round(ticks), atol=1e-4)  # every reading on the 0.05 grid
    residual = result.measured[3:, 0] - result.gt[:-3, 0]  # aligned by the configured delay
    assert np.abs(residual - 0.1).max() < 0.025 + 0.05  # bias, plus noise and half a quantization step


def test_inspect_default_runs(tmp_path):
    assert main(["inspect", "--steps", "30", "--out", str(tmp_path / "d.png")]) == 0
    assert (tmp_path / "d.png").stat().st_size > 10_000


# -- train and eval ------------------------------------------------------------------------------------------
def test_train_then_eval_round_trip_and_train_clean_test_noisy(tmp_path, capsys):
    cfg = tiny_config(tmp_path, '[critic]\ntype = "symmetric"')
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 0
    for name in ("model.zip", "vecnormalize.pkl", "config.json", "result.json"):
        assert (run / name).exists(), name
    assert list((run / "tb").iterdir()), "TensorBoard logs"
    saved = json.loads((run / "config.json").read_text())
    assert saved["sensors"]["angle"]["noise"] == 0.05
    assert json.loads((run / "result.json").read_text())["critic"] == "symmetric"
    assert main(["eval", str(run), "--episodes", "1"]) == 0
    noisy = write(
        tmp_path / "noisy.toml", (tmp_path / "tiny.toml").read_text().replace("noise = 0.05", "noise = 0.5")
    )
    assert main(["eval", str(run), "--config", str(noisy), "--episodes", "1"]) == 0
    out = capsys.readouterr().out
    assert "under its training sensors" in out and "noisy.toml" in out
    wrong = write(
        tmp_path / "wrong.toml",
        (tmp_path / "tiny.toml").read_text().replace("history_length = 2", "history_length = 4"),
    )
    assert main(["eval", str(run), "--config", str(wrong), "--episodes", "1"]) == 2
    # the same shape but another input, or other envs (other episodes): not a paired comparison either
    tiny = (tmp_path / "tiny.toml").read_text()
    for name, text in (("swapped", tiny.replace("index = [0, 1]", "index = [1, 0]")),
                       ("fewer", tiny.replace("n_envs = 2", "n_envs = 1"))):  # fmt: skip
        assert text != tiny
        capsys.readouterr()
        assert main(["eval", str(run), "--config", str(write(tmp_path / f"{name}.toml", text))]) == 2
        err = capsys.readouterr().err
        assert ("index" if name == "swapped" else "n_envs") in err and "Fix:" in err

    # inspect --model drives the policy as training and eval do: normalized with the run's VecNormalize
    # statistics (a review found it fed raw observations), and refuses a config of another policy shape
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    from sensorgym.app.saved_policy import SavedPolicy

    policy = SavedPolicy(run)
    model = PPO.load(run / "model.zip", device="cpu")
    raw = {
        "policy": np.random.default_rng(0)
        .normal(3.0, 2.0, (5, *model.observation_space["policy"].shape))
        .astype(np.float32)
    }
    with open(run / "vecnormalize.pkl", "rb") as f:
        stats = pickle.load(f)
    assert isinstance(stats, VecNormalize) and stats.norm_obs
    critic = np.zeros((5, *model.observation_space["critic"].shape), np.float32)
    expected = model.predict(
        stats.normalize_obs({"policy": raw["policy"], "critic": critic}), deterministic=True
    )
    np.testing.assert_array_equal(policy.predict(raw)[0], expected[0])
    unnormalized = model.predict(
        {"policy": raw["policy"].astype(np.float32), "critic": critic}, deterministic=True
    )
    assert not np.array_equal(expected[0], unnormalized[0])  # the statistics matter for this input
    inspect = ["inspect", "--model", str(run), "--steps", "5", "--out", str(tmp_path / "i.png")]
    assert main([*inspect, "--config", str(wrong)]) == 2
    assert main([*inspect, "--config", str(cfg)]) == 0


# -- ablate --------------------------------------------------------------------------------------------------
SWEEP = """
[sweep]
seeds = [0]
critic = ["symmetric", "asymmetric"]
grid = { "sensors.angle.noise" = [0.0, 0.2] }
"""


def _rows(path: Path) -> list[dict]:
    with (path / "results.csv").open() as f:
        return list(csv.DictReader(f))


def test_ablate_writes_outputs_and_resumes(tmp_path, capsys):
    cfg = tiny_config(tmp_path, SWEEP)
    out = tmp_path / "ab"
    assert main(["ablate", "--config", str(cfg), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    rows = _rows(out)
    assert len(rows) == 4 and {r["critic"] for r in rows} == {"symmetric", "asymmetric"}
    assert {r["sensors.angle.noise"] for r in rows} == {"0.0", "0.2"}
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# Does an asymmetric critic help? Pendulum-v1")
    assert "| angle noise | symmetric: mean ± sd (seeds) | asymmetric: mean ± sd (seeds) |" in summary
    assert "At angle noise = 0.0, one seed only" in summary and "At angle noise = 0.2" in summary
    assert matplotlib.image.imread(out / "return_vs_level.png").shape[1] > 300
    # resume: the first rows stay, nothing is rerun
    (out / "results.csv").write_text("".join((out / "results.csv").read_text().splitlines(True)[:3]))
    capsys.readouterr()
    assert main(["ablate", "--config", str(cfg), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    assert "; 2 already in" in capsys.readouterr().out
    again = _rows(out)
    assert len(again) == 4 and [r["run_id"] for r in again[:2]] == [r["run_id"] for r in rows[:2]]


def test_ablate_with_two_workers_matches_sequential(tmp_path):
    cfg = tiny_config(tmp_path, SWEEP)
    assert (
        main(
            [
                "ablate",
                "--config",
                str(cfg),
                "--out",
                str(tmp_path / "seq"),
                "--workers",
                "1",
                "--threads",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "ablate",
                "--config",
                str(cfg),
                "--out",
                str(tmp_path / "par"),
                "--workers",
                "2",
                "--threads",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    seq = {r["run_id"]: r["eval_return_mean"] for r in _rows(tmp_path / "seq")}
    par = {r["run_id"]: r["eval_return_mean"] for r in _rows(tmp_path / "par")}
    assert seq == par  # seeded runs, one torch thread each: the same numbers in worker processes


def test_ablate_on_a_local_ray_instance(tmp_path):
    ray = pytest.importorskip("ray")
    cfg = tiny_config(tmp_path, SWEEP.replace("[0.0, 0.2]", "[0.1]"))
    try:
        assert (
            main(
                [
                    "ablate",
                    "--config",
                    str(cfg),
                    "--out",
                    str(tmp_path / "ray"),
                    "--ray",
                    "local",
                    "--no-progress",
                ]
            )
            == 0
        )
    finally:
        ray.shutdown()
    assert len(_rows(tmp_path / "ray")) == 2


# -- configs -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "pattern"),
    [
        ({}, r"config sensors = None: at least one sensor.*Fix"),
        ({"sensors": {"a": {"key": "obs"}}}, r"sensors.a.*missing the sensor type"),
        (
            {"sensors": {"a": {"type": "StateSensorOptoins", "key": "obs"}}},
            r"did you mean 'StateSensorOptions'",
        ),
        (
            {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs", "nosie": 0.1}}},
            r"sensors.a.nosie: unknown key.*did you mean 'noise'",
        ),
        (
            {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs", "noise": -1.0}}},
            r"sensors.a.*noise=-1.0.*Fix",
        ),
        (
            {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs", "delay": {"dist": "Gauss"}}}},
            r"sensors.a.delay.dist = 'Gauss'.*unknown distribution",
        ),
        (
            {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}}, "env": {"n_envs": "4"}},
            r"env.n_envs = '4': expected int",
        ),
        (
            {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}}, "policy": {"sensors": ["b"]}},
            r"policy.sensors.*unknown sensors \['b'\]",
        ),
        (
            {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}}, "critic": {"type": "shared"}},
            r"critic.type = 'shared'",
        ),
        (
            {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}}, "algorithm": {"name": "SAC"}},
            r"only PPO",
        ),
        (
            {
                "sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}},
                "sweep": {"grid": {"sensors.b.noise": [0]}},
            },
            r"no sensor 'b'",
        ),
        (
            {
                "sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}},
                "sweep": {"grid": {"sensors.a.noise": [-1]}},
            },
            r"noise=-1",
        ),
        (
            {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}}, "envs": {}},
            r"<root>.envs: unknown key.*'env'",
        ),
    ],
)
def test_config_errors_name_the_key(raw, pattern):
    with pytest.raises(ConfigError, match=pattern):
        parse_config(raw)


def test_bad_config_file_is_reported_by_the_cli(tmp_path, capsys):
    bad = write(tmp_path / "bad.toml", '[sensors.a]\ntype = "StateSensorOptions"\nkey = "obs"\nnoise = -2\n')
    assert main(["inspect", "--config", str(bad)]) == 2
    assert "noise=-2" in capsys.readouterr().err
    assert main(["inspect", "--config", str(tmp_path / "missing.toml")]) == 2


@pytest.mark.parametrize("name", ["ablate", "train", "inspect"])
def test_embedded_defaults_are_the_shipped_example_configs(name):
    embedded = (resources.files("sensorgym.app.configs") / f"{name}.toml").read_text()
    assert embedded == (ROOT / "examples" / "configs" / f"{name}.toml").read_text()
    cfg = load_config(ROOT / "examples" / "configs" / f"{name}.toml")
    assert cfg.sensors


def test_resume_refuses_flags_it_would_ignore_and_a_fresh_run_drops_a_stale_checkpoint(
    tmp_path, capsys, monkeypatch
):
    cfg = tiny_config(tmp_path, "")
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 0
    assert (run / "checkpoint" / "model.zip").exists()
    capsys.readouterr()
    # --critic and --seed on a resume would be silently ignored, or relabel the run (found by a review)
    for flags, word in ((["--critic", "symmetric"], "--critic"), (["--seed", "7"], "--seed 7")):
        assert main(["train", "--out", str(run), "--resume", "--no-progress", *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and word in err[0] and "Fix:" in err[0], err
    assert json.loads((run / "config.json").read_text())["algorithm"].get("seed", 0) == 0
    # a fresh run in the same folder: the old checkpoint is removed before the new run starts, so an
    # interrupt before its first checkpoint cannot leave the new config paired with the old checkpoint
    import sensorgym.app.training as training
    from sensorgym.app.config import load_config

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(training, "train_ppo", interrupted)
    with pytest.raises(KeyboardInterrupt):
        training.train_from_config(load_config(cfg), run)
    assert not (run / "checkpoint").exists()


def test_a_discrete_action_env_without_a_control_step_trains_with_env_dt(tmp_path):
    """CartPole gives no dt (the config's [env] dt supplies it) and has discrete actions (the default PPO
    settings' gSDE is dropped for it)."""
    text = (
        '[env]\nid = "CartPole-v1"\nn_envs = 2\ndt = 0.02\n'
        '[sensors.pole]\ntype = "StateSensorOptions"\nkey = "obs"\nindex = [2, 3]\nnoise = 0.01\n'
        "[algorithm]\ntimesteps = 128\neval_episodes = 1\n"
        "kwargs = { n_steps = 64, batch_size = 64, n_epochs = 1 }\n"
    )
    cfg = write(tmp_path / "cartpole.toml", text)
    run = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--out", str(run), "--no-progress"]) == 0
    assert json.loads((run / "config.json").read_text())["env"]["dt"] == 0.02
    assert main(["eval", str(run), "--episodes", "1"]) == 0
