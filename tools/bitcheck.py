"""Bit-for-bit check of sensorgym's public behaviour: record the hashes of every output of a few hundred
deterministic scenarios, and compare a later tree against them (the safety net of a refactoring that must
change nothing, issue 34).

A scenario drives the public API (``SensorManager``, the options, sensors, ``state_dict``, the IMU,
``ActionLatency``, ``SensorObservation``) and hands every output to a :class:`Recorder`: readings, ages,
randomization, names, state dicts, observations, infos, warnings, exception types and messages. Each output
is hashed (sha256 of its bytes, dtype and shape included; a dict in sorted key order) under a label such
as ``"12.a.m"`` (step 12, sensor ``a``, measured reading). The scenario's ``digest`` is the sha256 over
every label and the full hash of every output, so any change to any output changes it; the JSON also
keeps, per output, 6 base64 characters of the hash of its label and value (``records``, concatenated),
which only locate the first difference (its label comes from the run that compares). The scenarios live
in bitcheck_engine.py (the manager and its options), bitcheck_sensors.py (setters, state dicts, several
classes, the IMU), bitcheck_gym.py (the Gymnasium layer) and bitcheck_errors.py (bad input).

Checkpoints across the change: ``record --checkpoints DIR`` also saves (``torch.save``) the state of a few
managers and wrappers mid-episode into ``DIR``; their ``file/`` scenarios load those files into freshly
built objects and continue. ``compare`` loads the files saved by the old tree, so a checkpoint written
before the change must load after it and continue exactly as it did then. The JSON remembers ``DIR``
(relative to itself); ``compare`` reads it from there unless ``--checkpoints`` says otherwise.

Usage:
    python tools/bitcheck.py record tests/data/bitcheck_baseline.json \
        --checkpoints tests/data/bitcheck_checkpoints
    python tools/bitcheck.py compare tests/data/bitcheck_baseline.json          # exit 1 on any difference
    python tools/bitcheck.py compare FILE --only 'opt/delay' 'err/'             # scenarios matching a regex
    python tools/bitcheck.py compare FILE --skip '^compile/'                    # all but the compiled ones
    python tools/bitcheck.py compare FILE --ignore '\\.sd/'    # accept changed state dicts, nothing else
    python tools/bitcheck.py list                                               # the scenario names
    python tools/bitcheck.py show 'opt/delay/numpy/one_rng'                     # every output, in words
    PYTHONPATH=/tmp/other_tree python tools/bitcheck.py compare FILE            # another tree's package

Record from a clean export of a commit (a working tree may hold others' uncommitted edits):
    git archive HEAD sensorgym | tar -x -C /tmp/head
    PYTHONPATH=/tmp/head python tools/bitcheck.py record tests/data/bitcheck_baseline.json \
        --checkpoints tests/data/bitcheck_checkpoints --commit $(git rev-parse HEAD)
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: base64 characters kept per output to locate a difference (36 bits; the scenario digest keeps all 256)
SHORT = 6
FORMAT = 1
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


# -- what an output's bytes are ------------------------------------------------------------------------
def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits as int16
        t = t.view(torch.int16)
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    return t.numpy().tobytes()


def normalized(text: str) -> str:
    """A message or repr without object addresses (``0x7f...``), which differ from run to run."""
    return _ADDRESS.sub("0x?", text)


def encode(value: Any, write: Callable[[bytes], None]) -> None:
    """Write ``value``'s bytes, typed and shaped, to ``write`` (tensors and arrays by their raw bytes)."""
    if isinstance(value, torch.Tensor):
        write(f"T{value.dtype}{tuple(value.shape)}:".encode())
        write(_tensor_bytes(value))
    elif isinstance(value, np.ndarray):
        if value.dtype == object:
            write(f"O{value.shape}:".encode())
            for item in value.flat:
                encode(item, write)
        else:
            write(f"N{value.dtype.str}{value.shape}:".encode())
            write(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, np.generic):
        write(f"G{value.dtype.str}:".encode() + value.tobytes())
    elif isinstance(value, BaseException):
        write(f"E{type(value).__qualname__}:{normalized(str(value))}".encode())
    elif isinstance(value, Mapping):
        write(f"D{len(value)}:".encode())
        for key in sorted(value, key=repr):
            encode(key, write)
            encode(value[key], write)
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        write(f"NT{type(value).__name__}{value._fields}:".encode())
        for item in value:
            encode(item, write)
    elif isinstance(value, (list, tuple)):
        write(f"{'L' if isinstance(value, list) else 'U'}{len(value)}:".encode())
        for item in value:
            encode(item, write)
    elif isinstance(value, (bool, int, float, str, bytes, type(None))):
        write(f"P{value!r};".encode())
    else:  # dtypes, devices, enums, distributions: their repr
        write(f"R{type(value).__qualname__}:{normalized(repr(value))};".encode())


def _brief(value: Any) -> str:
    """One line of an output for ``show``: values of small tensors, messages of exceptions."""
    if isinstance(value, BaseException):
        return f"{type(value).__qualname__}: {normalized(str(value))}"
    if isinstance(value, torch.Tensor) and value.numel() <= 12:
        return f"{value.dtype} {value.detach().cpu().tolist()}"
    if isinstance(value, torch.Tensor):
        return f"{value.dtype} {tuple(value.shape)}"
    if isinstance(value, np.ndarray) and value.dtype != object:
        return f"{value.dtype} {value.tolist() if value.size <= 12 else value.shape}"
    text = " ".join(normalized(repr(value)).split())
    return text if len(text) <= 200 else text[:200] + "..."


def digest(value: Any) -> str:
    h = hashlib.sha256()
    encode(value, h.update)
    return h.hexdigest()


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """``[(path, leaf)]`` of nested mappings (sorted keys) and lists, for a state dict's records."""
    if isinstance(value, Mapping):
        out = []
        for key in sorted(value, key=repr):
            out += flatten(value[key], f"{prefix}.{key}" if prefix else str(key))
        return out
    if (
        isinstance(value, (list, tuple))
        and not hasattr(value, "_fields")
        and value
        and all(isinstance(v, (Mapping, list, tuple, torch.Tensor)) for v in value)
    ):
        out = []
        for i, item in enumerate(value):
            out += flatten(item, f"{prefix}[{i}]")
        return out
    return [(prefix, value)]


# -- what a scenario writes ------------------------------------------------------------------------------
@dataclass
class Context:
    """How a scenario runs: ``mode`` is ``"record"`` or ``"compare"``; ``checkpoints`` the folder of the
    checkpoint files (written in record mode, only read in compare mode)."""

    mode: str = "compare"
    checkpoints: Path | None = None


@dataclass
class Recorder:
    labels: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)  # per output: SHORT characters of its label and hash
    full: Any = field(default_factory=hashlib.sha256)
    raised: list[str] = field(default_factory=list)  # labels where an exception was recorded
    show: bool = False  # print every output (the ``show`` command)

    def out(self, label: str, value: Any) -> None:
        """One output: its label and the hash of its bytes."""
        line = f"{label}\0{digest(value)}\n".encode()
        self.full.update(line)
        self.labels.append(label)
        self.codes.append(base64.urlsafe_b64encode(hashlib.sha256(line).digest()).decode()[:SHORT])
        if self.show:
            print(f"{len(self.codes) - 1:5d} {self.codes[-1]} {label}: {_brief(value)}")

    def state(self, label: str, state: Mapping[str, Any]) -> None:
        """A state dict, one record per leaf (so a difference names the key)."""
        for path, leaf in flatten(state):
            self.out(f"{label}/{path}", leaf)

    def attempt(self, label: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn``; an exception it raises is an output (type and message), and None is returned."""
        try:
            return fn()
        except Exception as e:  # the exception is what is recorded
            self.raised.append(label)
            self.out(label, e)
            return None

    def raises(self, label: str, fn: Callable[[], Any]) -> None:
        """An input that must be refused: its exception's type and message (or that none was raised)."""
        try:
            fn()
        except Exception as e:
            self.out(label, e)
            return
        self.out(label, "no exception")


@functools.cache
def _registry() -> dict[str, Callable[[Recorder, Context], None]]:
    """Every scenario by name (each scenario module's ``scenarios()``)."""
    import bitcheck_engine
    import bitcheck_errors
    import bitcheck_gym
    import bitcheck_sensors

    out: dict[str, Callable[[Recorder, Context], None]] = {}
    for module in (bitcheck_engine, bitcheck_sensors, bitcheck_gym, bitcheck_errors):
        for name, fn in module.scenarios().items():
            if name in out:
                raise RuntimeError(f"bitcheck: scenario {name!r} defined twice")
            out[name] = fn
    return out


def run_one(name: str, ctx: Context, show: bool = False) -> dict[str, Any]:
    """Run one scenario from a clean start; its records, digest, time and the labels that raised."""
    fn = _registry()[name]
    torch.manual_seed(0)
    np.random.seed(0)
    rec = Recorder(show=show)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            fn(rec, ctx)
        except Exception as e:  # a scenario that dies is a difference, not a crash of the whole check
            rec.raised.append("<scenario>")
            rec.out("<scenario raised>", e)
    package = str(Path(sys.modules["sensorgym"].__file__).resolve().parent)
    ours = [
        f"{w.category.__name__}: {normalized(str(w.message))}"
        for w in caught
        if str(Path(w.filename).resolve()).startswith((package, str(HERE)))
    ]
    rec.out("<warnings>", ours)
    return {
        "name": name,
        "digest": rec.full.hexdigest(),
        "records": "".join(rec.codes),
        "labels": rec.labels,
        "seconds": time.perf_counter() - start,
        "raised": rec.raised,
    }


def _run_chunk(names: list[str], ctx: Context) -> list[dict[str, Any]]:
    return [run_one(n, ctx) for n in names]


def run_all(names: list[str], ctx: Context, jobs: int) -> dict[str, dict[str, Any]]:
    """Run ``names`` here (``jobs <= 1``) or in ``jobs`` fresh processes (each scenario starts clean, so the
    results do not depend on which process runs which)."""
    if jobs <= 1:
        results = _run_chunk(names, ctx)
    else:
        import multiprocessing

        chunks = [names[i::jobs] for i in range(jobs)]
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = [r for part in pool.map(_run_chunk, chunks, [ctx] * jobs) for r in part]
    return {r["name"]: r for r in results}


def _select(names: list[str], only: list[str] | None, skip: list[str] | None = None) -> list[str]:
    """The names matching any regex of ``only`` (all when None) and none of ``skip``."""
    chosen = [re.compile(p) for p in only or []]
    left_out = [re.compile(p) for p in skip or []]
    return [
        n
        for n in names
        if (not chosen or any(p.search(n) for p in chosen)) and not any(p.search(n) for p in left_out)
    ]


def _source() -> dict[str, Any]:
    """Which package ran: its folder, and its git commit and whether it differs from it (where known)."""
    import sensorgym

    package = Path(sensorgym.__file__).resolve().parent
    info: dict[str, Any] = {"package": str(package)}
    try:
        git = ["git", "-C", str(package.parent)]
        info["commit"] = subprocess.run(
            [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            [*git, "status", "--porcelain", "--", "sensorgym"], capture_output=True, text=True, check=True
        ).stdout
        info["package_modified"] = bool(status.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    return info


# -- commands ------------------------------------------------------------------------------------------
def record(args: argparse.Namespace) -> int:
    ckpt = args.checkpoints.resolve() if args.checkpoints else None
    if ckpt is not None:
        ckpt.mkdir(parents=True, exist_ok=True)
    names = [
        n
        for n in _select(sorted(_registry()), args.only, args.skip)
        if ckpt is not None or not n.startswith("file/")
    ]
    start = time.perf_counter()
    results = run_all(names, Context("record", ckpt), args.jobs)
    out = Path(args.file)
    data = {
        "format": FORMAT,
        "label": args.label,
        "source": {**_source(), **({"commit": args.commit} if args.commit else {})},
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__, "numpy": np.__version__},
        "checkpoints": None if ckpt is None else os.path.relpath(ckpt, out.resolve().parent),
        "scenarios": {
            n: {"digest": r["digest"], "outputs": len(r["labels"]), "records": r["records"]}
            for n, r in sorted(results.items())
        },
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    _summary(results, time.perf_counter() - start, args.verbose)
    raised = {n: r["raised"] for n, r in results.items() if r["raised"] and not n.startswith("err/")}
    if raised:  # recorded as outputs; listed so that an accidental failure is seen at record time
        print(f"scenarios with a recorded exception ({len(raised)}):")
        for n, labels in sorted(raised.items()):
            print(f"  {n}: {', '.join(labels[:4])}")
    print(f"recorded {len(results)} scenarios into {out}")
    return 0


def _codes(records: str) -> list[str]:
    return [records[i : i + SHORT] for i in range(0, len(records), SHORT)]


def _first_difference(old: str, new: str, labels: list[str]) -> str:
    """Where two scenario runs part: the first output whose short code differs, named by its label now,
    and how many differ."""
    old_codes, new_codes = _codes(old), _codes(new)
    if len(old_codes) != len(new_codes):
        i = next((i for i, (a, b) in enumerate(zip(old_codes, new_codes, strict=False)) if a != b), None)
        i = min(len(old_codes), len(new_codes)) if i is None else i
        now = f"; output {i} now: {labels[i]!r}" if len(new_codes) > i else ""
        return f"{len(old_codes)} outputs recorded, {len(new_codes)} now, the first {i} agree{now}"
    differing = [i for i, (a, b) in enumerate(zip(old_codes, new_codes, strict=True)) if a != b]
    if not differing:
        return "the digest differs but every short code agrees (a collision in the short codes)"
    i = differing[0]
    before = f" (after {labels[i - 1]!r}, which agrees)" if i else ""
    return f"output {i} {labels[i]!r} differs{before}; {len(differing)} of {len(new_codes)} outputs differ"


def _ignored(old: str, new: str, labels: list[str], ignore: re.Pattern | None) -> bool:
    """Whether every output that differs has a label ``ignore`` matches (same outputs in the same order)."""
    old_codes, new_codes = _codes(old), _codes(new)
    if ignore is None or len(old_codes) != len(new_codes):
        return False
    pairs = zip(old_codes, new_codes, labels, strict=True)
    return all(a == b or ignore.search(label) for a, b, label in pairs)


def compare(args: argparse.Namespace) -> int:
    path = Path(args.file)
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        print(f"bitcheck: {path} has format {data.get('format')!r}, this tool writes {FORMAT}")
        return 2
    ckpt = args.checkpoints
    if ckpt is None and data.get("checkpoints"):
        ckpt = path.resolve().parent / data["checkpoints"]
    known = _registry()
    baseline = data["scenarios"]
    names = _select(sorted(baseline), args.only, args.skip)
    unknown = [n for n in names if n not in known]
    runnable = [n for n in names if n in known and (ckpt is not None or not n.startswith("file/"))]
    skipped = [n for n in names if n in known and n not in runnable]
    start = time.perf_counter()
    results = run_all(runnable, Context("compare", None if ckpt is None else Path(ckpt)), args.jobs)
    differ = [n for n in runnable if results[n]["digest"] != baseline[n]["digest"]]
    ignore = re.compile(args.ignore) if args.ignore else None
    ignored = [
        n
        for n in differ
        if _ignored(baseline[n]["records"], results[n]["records"], results[n]["labels"], ignore)
    ]
    differ = [n for n in differ if n not in ignored]
    if ignored:
        print(f"note: {len(ignored)} scenarios differ only in outputs matching --ignore {args.ignore!r}")
    _summary(results, time.perf_counter() - start, args.verbose)
    new = sorted(set(_select(sorted(known), args.only, args.skip)) - set(baseline))
    if new:
        print(
            f"note: {len(new)} scenarios of this tool are not in {path} (not compared): {', '.join(new[:8])}"
        )
    if skipped:
        print(f"note: {len(skipped)} file/ scenarios skipped: no checkpoint folder (--checkpoints)")
    for n in unknown:
        print(f"MISSING {n}: recorded, but this tool no longer defines it")
    for n in differ:
        r = results[n]
        print(f"DIFFERS {n}: {_first_difference(baseline[n]['records'], r['records'], r['labels'])}")
    print(
        f"compared {len(runnable)} scenarios against {path} "
        f"(recorded at {data.get('source', {}).get('commit', '')[:10] or data.get('label') or '?'}): "
        f"{len(differ)} differ, {len(unknown)} missing"
    )
    return 1 if differ or unknown else 0


def _summary(results: dict[str, dict[str, Any]], seconds: float, verbose: bool) -> None:
    slow = sorted(results.values(), key=lambda r: -r["seconds"])[: 10 if verbose else 3]
    total = sum(r["seconds"] for r in results.values())
    print(
        f"{len(results)} scenarios in {seconds:.1f} s wall ({total:.1f} s in scenarios); slowest: "
        + ", ".join(f"{r['name']} {r['seconds']:.2f} s" for r in slow)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in ("record", "compare"):
        p = sub.add_parser(command)
        p.add_argument("file", help="the JSON of hashes")
        p.add_argument("--checkpoints", type=Path, default=None, help="folder of the checkpoint files")
        p.add_argument("--only", nargs="+", default=None, help="regexes: run the scenarios matching any")
        p.add_argument(
            "--skip", nargs="+", default=None, help="regexes: leave out the scenarios matching any"
        )
        p.add_argument(
            "--jobs", type=int, default=1, help="worker processes (the hashes do not depend on it)"
        )
        p.add_argument("-v", "--verbose", action="store_true")
        if command == "compare":
            p.add_argument(
                "--ignore", default=None, help="a regex of output labels whose differences are accepted"
            )
        if command == "record":
            p.add_argument("--label", default="", help="a note stored in the JSON")
            p.add_argument("--commit", default="", help="the commit of a package exported out of git")
    lister = sub.add_parser("list")
    lister.add_argument("--only", nargs="+", default=None)
    shower = sub.add_parser("show", help="print every output of the scenarios matching a regex")
    shower.add_argument("only", nargs="+")
    shower.add_argument("--checkpoints", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "show":  # to diff two trees' outputs: run it on each and diff the text
        for name in _select(sorted(_registry()), args.only):
            print(f"## {name}")
            run_one(name, Context("compare", args.checkpoints), show=True)
        return 0
    if args.command == "list":
        names = _select(sorted(_registry()), args.only)
        print("\n".join(names))
        print(f"{len(names)} scenarios", file=sys.stderr)
        return 0
    return record(args) if args.command == "record" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
