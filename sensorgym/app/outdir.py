"""Output folders: a command never loses what a reused ``--out`` already holds.

Before ``train`` or ``ablate`` writes anything into ``--out`` (and ``inspect`` its figure), it checks:

* the path can hold the outputs: a folder (a file there is refused), writable (a read-only file system
  or a folder without write permission is refused), with one line naming the path and the fix;
* ``ablate``: a folder that holds finished runs of **another config** (another env, sensors, critic
  inputs, algorithm or budget: anything but the ``[sweep]`` table, which only adds or removes runs, and
  the ``[deploy]`` conditions, which only score them) is refused; the same config resumes, and another
  ``[sweep]`` or ``[deploy]`` of it (more seeds, more levels, another condition) reuses the runs it shares;
* ``train`` (without ``--resume``): a folder that holds a run (a checkpoint at N steps, or a finished
  model) or a study is refused; ``train --resume`` on a study says it holds no run;
* either: a folder holding files of the names the command writes that sensorgym did not write (a
  ``config.json`` that is not a sensorgym config: the user's own) is refused.

With ``--force`` nothing is deleted either: what the folder held is moved, as it was, into
``<out>/replaced-<UTC date and time>/`` and the command starts afresh.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp())
    >>> (out / "result.json").write_text("{}")
    2
    >>> moved = move_aside(out, ["result.json", "model.zip"])   # what is there moves; the rest is skipped
    >>> moved.name.startswith("replaced-"), sorted(p.name for p in moved.iterdir())
    (True, ['result.json'])
"""

from __future__ import annotations

import csv
import errno
import json
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .config import UserError

__all__ = [
    "RUN_FILES",
    "STUDY_FILES",
    "checkpoint_steps",
    "differing_keys",
    "foreign_conflict",
    "move_aside",
    "prepare_file",
    "prepare_folder",
    "read_results",
    "resume_conflict",
    "run_conflict",
    "study_base",
    "study_conflict",
]

#: what ``sensorgym ablate`` writes into its folder (``.finished``: rows a killed sweep's workers left;
#: ``runs``: a run directory per run; ``deploy.png``: with ``[deploy]`` conditions)
STUDY_FILES = (
    "results.csv", "summary.md", "return_vs_level.png", "config.json", ".finished", "runs", "deploy.png",
)  # fmt: skip
#: what ``sensorgym train`` writes into its run directory
RUN_FILES = ("model.zip", "vecnormalize.pkl", "config.json", "result.json", "checkpoint", "tb")

_NOT_WRITABLE = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


def _cannot_write(flag: str, path: Path, e: OSError) -> UserError:
    return UserError(write_error(path, e, flag, lead=f"{flag} {path}: cannot write there"))


def write_error(path: Path | str, e: OSError, flag: str = "--out", lead: str | None = None) -> str:
    """One line saying why ``path`` could not be written, with the fix for that cause: a missing write
    permission (``chmod``, or another folder), a read-only file system, a full disk or quota (the only case
    where freeing space helps), or a file where a folder is needed. A path that exists but cannot be read is
    said so. ``lead``: the line's start (default ``cannot write PATH``).

    Example:
        >>> import errno
        >>> folder = Path(tempfile.mkdtemp())
        >>> line = write_error(folder / "fitted.toml", PermissionError(errno.EACCES, "Permission denied"))
        >>> f"{folder} is not writable (permission denied)" in line, f"(chmod u+w {folder})" in line
        (True, True)
        >>> "Fix: free space" in write_error(folder, OSError(errno.ENOSPC, "No space left on device"))
        True
    """
    path = Path(path)
    # the folder (or file) that refused: the path itself when it exists, else its nearest existing parent
    where = next((p for p in [path, *path.parents] if p.exists()), path)
    home = Path.home() / "sensorgym_outputs"
    choose = f"choose an {flag} you can write to, e.g. {flag} {home}"
    lead = lead or f"cannot write {path}"
    subject = "it is" if where == path else f"{where} is"
    code = e.errno
    if code in (errno.EACCES, errno.EPERM):
        if path.is_file() and not os.access(path, os.R_OK):
            return f"cannot read {path}: permission denied. Fix: make it readable (chmod u+r {path})."
        return (
            f"{lead}: {subject} not writable (permission denied). Fix: {choose}, or give yourself write "
            f"permission there (chmod u+w {where})."
        )
    if code == errno.EROFS:
        return f"{lead}: {subject} on a read-only file system. Fix: {choose} on a writable disk."
    if code in (errno.ENOSPC, errno.EDQUOT):
        full = "your disk quota is used up" if code == errno.EDQUOT else "no space is left on its disk"
        return f"{lead}: {full}. Fix: free space there, or {choose} on another disk."
    why = (e.strerror or str(e)).lower()
    return (
        f"{lead}: {why} (a file stands where a folder is needed, or a folder where a file is). Fix: "
        f"choose an {flag} that is a folder, or move the file in the way."
    )


def prepare_folder(out: Path, flag: str = "--out") -> None:
    """Create ``out`` (with its parents) and check that files can be written in it; a file at that path,
    a read-only file system or a missing permission is a :class:`~sensorgym.app.config.UserError`."""
    if out.exists() and not out.is_dir():
        raise UserError(
            f"{flag} {out} is a file; the command writes a folder of outputs there. Fix: pass a folder path "
            f"(e.g. {flag} {out.with_suffix('')}_outputs), or move the file away."
        )
    parent = next((p for p in [out, *out.parents] if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UserError(
            f"{flag} {out}: {parent} is a file, so no folder can be made below it. Fix: choose another path."
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        # a real write: os.access says yes to root on a chmod-protected folder, and to anyone on some
        # network file systems; only writing shows that the outputs will fit
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        if e.errno in _NOT_WRITABLE:
            raise _cannot_write(flag, out, e) from None
        raise


def prepare_file(path: Path, flag: str = "--out") -> None:
    """Check that the file ``path`` can be written: not a folder, its folder creatable and writable."""
    if path.is_dir():
        raise UserError(
            f"{flag} {path} is a folder; the command writes one image file. Fix: pass a file path such as "
            f"{flag} {path / 'inspect.png'}."
        )
    prepare_folder(path.parent if str(path.parent) else Path("."), flag)


def move_aside(out: Path, names: Iterable[str]) -> Path:
    """Move the entries ``names`` of ``out`` that exist, untouched, into a new ``out/replaced-<time>/``;
    return that folder. Nothing is deleted: a ``--force`` never loses results."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    target = out / f"replaced-{stamp}"
    n = 1
    while target.exists():  # two --force in the same second
        n += 1
        target = out / f"replaced-{stamp}-{n}"
    target.mkdir()
    for name in names:
        if (out / name).exists():
            os.replace(out / name, target / name)
    return target


def study_base(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies a study's runs: the config without its ``[sweep]`` and ``[deploy]`` tables (which
    add or remove runs and the conditions they are scored under), as JSON data (the run ids of
    :func:`sensorgym.app.ablation.plan_runs` hash exactly this, with the cell, critic and seed)."""
    kept = {k: v for k, v in raw.items() if k not in ("sweep", "deploy")}
    return json.loads(json.dumps(kept, default=str))


def differing_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two nested mappings.

    Example:
        >>> differing_keys({"env": {"id": "A", "n": 1}, "x": 1}, {"env": {"id": "B", "n": 1}, "y": 2})
        ['env.id', 'x', 'y']
    """
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            out += differing_keys(a.get(key), b.get(key), f"{prefix}{key}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]


def read_results(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``results.csv`` (an empty list when it does not exist)."""
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def _finished_rows(out: Path) -> list[dict[str, Any]]:
    rows = list(read_results(out / "results.csv")) if (out / "results.csv").is_file() else []
    folder = out / ".finished"
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            try:
                rows.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
    return rows


def _saved_config(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / "config.json").read_text())
    except (OSError, ValueError):
        return None


def _force_hint(out: Path, what: str) -> str:
    return f"--force (which moves {what} to {out}/replaced-<time>/, nothing is deleted)"


def _written_by_sensorgym(out: Path) -> bool:
    """Whether ``out/config.json`` is a sensorgym config (what ``train`` and ``ablate`` write: a JSON
    mapping with an ``env`` table holding an ``id``, and ``sensors``)."""
    saved = _saved_config(out)
    return isinstance(saved, dict) and isinstance(saved.get("env"), dict) and "id" in saved["env"]


def foreign_conflict(out: Path, names: Iterable[str], command: str) -> str | None:
    """Why ``command`` must not write its outputs ``names`` into ``out``: a file of those names is there
    that sensorgym did not write (a ``config.json`` that is not a sensorgym config, or outputs beside none),
    which writing would overwrite; ``None`` when there is none."""
    present = [name for name in names if (out / name).exists()]
    if not present or _written_by_sensorgym(out):
        return None
    shown = ", ".join(present[:3]) + (f" and {len(present) - 3} more" if len(present) > 3 else "")
    return (
        f"--out {out} holds {shown}, which `sensorgym {command}` did not write and would overwrite. Fix: "
        "choose another --out (an empty or new folder), or " + _force_hint(out, "those files") + "."
    )


def study_conflict(out: Path, raw: Mapping[str, Any], run_ids: set[str]) -> str | None:
    """Why ``sensorgym ablate`` must not write the study of config ``raw`` (with runs ``run_ids``) into
    ``out``, or ``None`` when it may: the folder is new or empty, holds no finished run, or holds a study
    of the same config (it resumes, and another ``[sweep]`` of that config shares its runs)."""
    if (out / "model.zip").exists() or (out / "checkpoint").exists():
        return (
            f"--out {out} holds a training run (`sensorgym train`), not a study. Fix: choose another "
            "--out, or " + _force_hint(out, "the run") + "."
        )
    rows = _finished_rows(out)
    if not rows:  # nothing finished there: nothing of a study to lose, but maybe a user's own files
        return foreign_conflict(out, STUDY_FILES, "ablate")
    saved = _saved_config(out)
    if saved is None:  # no config.json (written by hand?): only rows of this very plan are safe to mix
        if all(r.get("run_id") in run_ids for r in rows):
            return None
        why = "of an unknown config (no config.json)"
    else:
        changed = differing_keys(study_base(saved), study_base(raw))
        if not changed:
            return None
        shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        why = f"of another config (it differs in {shown})"
    return (
        f"--out {out} holds a study {why}, with {len(rows)} finished run(s) in results.csv. Fix: choose "
        "another --out, or " + _force_hint(out, "that study") + "."
    )


def checkpoint_steps(checkpoint: Path) -> int | None:
    """The steps a run's checkpoint was written at (``None`` when there is no readable checkpoint)."""
    try:
        return int(json.loads((checkpoint / "progress.json").read_text())["timesteps"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if not (checkpoint / "state.pt").exists():
        return None
    try:  # a checkpoint of an older version: the step count is in its plain-data state
        import torch

        state = torch.load(checkpoint / "state.pt", weights_only=True, map_location="cpu")
        return int(state["num_timesteps"])
    except Exception:  # unreadable: still a run, of unknown length
        return -1


def run_conflict(out: Path) -> str | None:
    """Why ``sensorgym train`` (a new run, not ``--resume``) must not write into ``out``, or ``None``."""
    resume = f"sensorgym train --out {out} --resume"
    if (out / "model.zip").exists():
        try:
            result = json.loads((out / "result.json").read_text())
            what = f"{int(result['timesteps']):,} steps, final score {float(result['eval_return_mean']):.1f}"
        except (OSError, ValueError, KeyError, TypeError):
            what = "its final score in result.json"
        return (
            f"--out {out} holds a finished run ({what}). Fix: choose another --out, continue it with "
            f"`{resume} --timesteps <more>`, or " + _force_hint(out, "it") + "."
        )
    steps = checkpoint_steps(out / "checkpoint")
    if steps is not None:
        at = f"at {steps:,} steps" if steps >= 0 else "with a checkpoint"
        return (
            f"--out {out} holds a run {at} that did not finish. Fix: continue it with `{resume}`, or "
            + _force_hint(out, "it")
            + "."
        )
    if _finished_rows(out):
        return (
            f"--out {out} holds an ablation study (results.csv). Fix: choose another --out, or "
            + _force_hint(out, "the study")
            + "."
        )
    return foreign_conflict(out, RUN_FILES, "train")


def resume_conflict(out: Path) -> str | None:
    """Why ``sensorgym train --resume`` cannot resume in ``out`` because it holds something else than a
    run (an ablation study), or ``None``."""
    if _finished_rows(out) and not (out / "checkpoint").exists():
        return (
            f"--out {out} holds an ablation study (results.csv), not a `sensorgym train` run: there is "
            f"nothing to resume. Fix: pass the --out of a train run, or train anew in another folder "
            f"(sensorgym train --out {out.parent / (out.name + '_train')})."
        )
    return None
