"""What the commands and the README say about the commands is what they do (issue 33 item 20): ``demo``
prints as many rows as ``--steps`` (41 for the default 40 before), ``inspect --help`` names the sampler
figure that is written (it said ``<name>_sampler.png``), ``train`` says what runs after "100%" (the last
update, the checkpoint and the final evaluation, about 110 s without a word on a busy machine), and the
README's ``sensorgym fit`` example prints the lines the README shows (it showed +7.5% where +7.2% was
printed)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from sensorgym.app.cli import DEFAULT_OUT, main
from sensorgym.app.inspection import sampling_path

from .common import ROOT, sensorgym, sensorgym_here, write_config


def _table_rows(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if re.match(r"^\s*\d+\s+\d+\.\d\d\s", line)]


def test_demo_prints_as_many_rows_as_steps(tmp_path):
    default = sensorgym(tmp_path, "demo")
    assert default.returncode == 0, default.stderr
    rows = _table_rows(default.stdout)
    assert len(rows) == 40 and rows[0].split()[0] == "0" and rows[-1].split()[0] == "39", rows[-1]
    for steps in (1, 5):
        assert len(_table_rows(sensorgym_here(tmp_path, "demo", "--steps", str(steps)).stdout)) == steps


def test_inspect_help_names_the_sampler_figure_it_writes(capsys):
    assert main(["inspect", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "<name>_sampler.png" not in text
    default = sampling_path(DEFAULT_OUT / "inspect.png").name  # what run_inspect writes
    assert f"{default} for the default" in text and default == "inspect_sampler.png"
    assert f"{sampling_path(Path('fig.png')).name} for --out fig.png" in text


def _after_the_last_step(lines: list[str]) -> list[str]:
    at = next(i for i, line in enumerate(lines) if "(100%)" in line)
    return lines[at + 1 :]


def test_train_says_what_runs_after_the_last_step(tmp_path):
    config = write_config(tmp_path, timesteps=256, eval_episodes=2)
    proc = sensorgym(tmp_path, "train", "--config", str(config), "--out", "run", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    after = _after_the_last_step(proc.stdout.splitlines())
    assert after[0] == (
        "  all 256 steps collected; now the last update (1 pass over the last rollout) and the checkpoint, "
        "then the final evaluation (2 episodes): no progress is shown for these"
    ), after
    assert re.fullmatch(
        r"  last update and checkpoint done \(\d+ s\); the final evaluation of 2 episodes runs now", after[1]
    ), after
    assert after[2].startswith("final score: "), after


def test_train_with_a_bar_says_it_below_the_bar(tmp_path, capsys):
    """On a terminal (the bar): the same two lines, after the bar is closed."""
    from sensorgym.app.config import load_config
    from sensorgym.app.training import train_from_config

    cfg = load_config(write_config(tmp_path, timesteps=128, eval_episodes=1))
    train_from_config(cfg, tmp_path / "run", progress_bar=True)
    out = capsys.readouterr()
    assert "training: 100%" in out.err, out.err
    lines = out.out.splitlines()
    assert lines[0].startswith("  all 128 steps collected; now the last update (1 pass"), lines
    assert lines[1].startswith("  last update and checkpoint done ("), lines


def _readme_fit_example() -> tuple[list[str], list[str]]:
    """The README's ``sensorgym fit`` command (its arguments) and the printed lines it shows."""
    block = next(
        b for b in re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S) if "fit " in b
    )
    command = " ".join(block.split("sensorgym fit ", 1)[1].split("\n#", 1)[0].replace("\\\n", " ").split())
    shown = [line[2:] for line in block.splitlines() if line.startswith("# closed loop")]
    return shlex.split(command), shown


def test_the_readme_fit_example_prints_the_lines_it_shows(tmp_path):
    """The README's command, run as written (its relative paths from a folder like the repository's), prints
    last exactly the closed-loop lines the README shows; and the README says it only shows the route."""
    pytest.importorskip("allantools")
    for name in ("tests", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    args, shown = _readme_fit_example()
    assert len(shown) == 2, shown
    proc = sensorgym(tmp_path, "fit", *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-2:] == shown
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "The example shows the route only" in text and "in the wrong units" in text


def test_the_readme_and_ablate_toml_give_the_same_duration_and_the_question_3_seeds_answer():
    """The README said 3 min, ablate.toml 3-6 min; both now give the measured idle time and the range
    measured beside other work, and ask the question the default study (3 seeds) can answer."""
    import tomllib

    from sensorgym.app.ablation.statistics import detectable_difference

    # the README's comment continues over lines of its bash block: "  # " at each line's start
    readme = " ".join(re.sub(r"\n +# ", " ", (ROOT / "README.md").read_text()).split())
    toml_text = (ROOT / "examples/configs/ablate.toml").read_text()
    header = " ".join(line.lstrip("# ") for line in toml_text.splitlines() if line.startswith("#"))
    for text in (readme, header):
        assert "about 3 min on 2 idle cores" in text and "2 min 36 s" in text
        assert "8 to 25 min" in text
        assert (
            "does an asymmetric critic change the score" in text and "by more than 3 seeds can detect" in text
        )
    assert len(tomllib.loads(toml_text)["sweep"]["seeds"]) == 3
    assert "how much does an asymmetric critic help" not in readme.lower()
    # "10 seeds detect about a third as much" (at the same spread)
    assert detectable_difference(1.0, 10) / detectable_difference(1.0, 3) == pytest.approx(1 / 3, abs=0.03)
