"""The summary of benchmarks/gpu_check.sh: ``python -m benchmarks.gpu_summary DIR --part
NAME=RC:SECONDS:CAP ... [--sweep SWEEP_DIR] [--elapsed S]``.

Reads what the check's parts left in DIR (bench_trainer.json, bench_seeds.json, tests.xml) and
the grid's sweep folder, writes DIR/summary.txt and prints it. It states, in these words,
``E=1: <ratio>x the CUDA graph`` (sweepgrok's one-seed step over the CUDA-graph notebook step;
<= 1 meets the target) and ``E=<E>: <ms> ms per member-step`` for every E measured, and which
parts failed. A missing or broken input is a line saying so, never a traceback: the summary is
the one file that must come back.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

PREFERRED = ("sweepgrok graph on", "sweepgrok", "sweepgrok graph off")
"""The variant a headline quotes: graph on (what auto picks on CUDA) where it was measured."""


def parse_part(text: str) -> tuple[str, str, int, int]:
    """'tests=124:150:150' -> ('tests', '124', 150, 150)."""
    name, _, rest = text.partition("=")
    rc, secs, cap = [*rest.split(":"), "0", "0"][:3]
    return name, rc, int(secs or 0), int(cap or 0)


def part_line(name: str, rc: str, secs: int, cap: int) -> tuple[str, bool]:
    """('bench_seeds ok (63 s)', True) or a failure's wording and False."""
    if rc == "0":
        return f"{name} ok ({secs} s)", True
    if rc == "skipped":
        return f"{name} SKIPPED (budget spent)", False
    if rc in ("124", "137"):
        return f"{name} TIMED OUT (cap {cap} s)", False
    return f"{name} FAILED (exit {rc}, {secs} s)", False


def headline(ms: dict[str, float]) -> str | None:
    """The variant to quote: the first of PREFERRED that was measured."""
    return next((v for v in PREFERRED if v in ms), None)


def trainer_lines(doc: dict[str, Any]) -> list[str]:
    """One seed: every variant's ms per step and `E=1: <r>x the CUDA graph`."""
    out = []
    for row in doc["rows"]:
        ms = row["ms"]
        out.append(f"One seed, {row['case']} ({row['device']}), ms per step: "
                   + ", ".join(f"{k} {v:.3f}" for k, v in ms.items()))
        best = headline(ms)
        if "cuda graph" not in ms or best is None:
            out.append("E=1: no CUDA-graph reference measured (it needs a CUDA device)")
            continue
        others = [f"{k.removeprefix('sweepgrok ')}: {v / ms['cuda graph']:.2f}x"
                  for k, v in ms.items() if k.startswith("sweepgrok") and k != best]
        out.append(f"E=1: {ms[best] / ms['cuda graph']:.2f}x the CUDA graph ({best}"
                   + (f"; {', '.join(others)}" if others else "") + ")")
        out.append(f"E=1: {ms[best] / ms['reference']:.2f}x the eager notebook loop")
    return out


def seeds_lines(doc: dict[str, Any]) -> list[str]:
    """Packed seeds: `E=<E>: <ms> ms per member-step (<r>x the FP32 floor)` per E."""
    rows = doc["rows"]
    if not rows:
        return ["Packed seeds: nothing measured"]
    first = rows[0]
    floor = first["floor_ms_per_member_step"]
    out = [f"Packed seeds (paper-1 model, {doc['device']}): FP32 floor "
           f"{floor:.4f} ms per member-step ({first['flops_per_member_step'] / 1e9:.2f} GFLOP)"]
    for row in rows:
        e, ms = row["members"], row["ms"]
        best = headline(ms)
        if best is None:
            out.append(f"E={e}: no sweepgrok variant measured")
            continue
        per = ms[best] / e
        others = [f"{k.removeprefix('sweepgrok ')}: {v / e:.4f}"
                  for k, v in ms.items() if k != best]
        out.append(f"E={e}: {per:.4f} ms per member-step "
                   f"({per / row['floor_ms_per_member_step']:.2f}x the FP32 floor; {best}"
                   + (f"; {', '.join(others)}" if others else "") + ")")
    return out


def grid_lines(sweep: Path | None) -> list[str]:
    """The grid's runs: how many, their statuses, the devices they trained on (and the GPU ids
    Ray gave them)."""
    if sweep is None:
        return []
    import pandas as pd  # here: the rest of this module needs nothing beyond the stdlib

    runs = pd.read_parquet(sweep / "runs")
    statuses = dict(Counter(runs["status"]))
    seen = {col: dict(Counter(runs[col].astype(str))) for col in ("device", "gpu_ids")
            if col in runs}  # gpu_ids: what Ray assigned, where this version records it
    return [f"Ray grid ({sweep.name}): {len(runs)} runs, statuses {statuses}"
            + "".join(f", {col} {counts}" for col, counts in seen.items())]


def test_lines(xml: Path) -> list[str]:
    """Counts from the JUnit file, and the failed tests' names (at most 30)."""
    root = ET.parse(xml).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return [f"Tests: {xml.name} has no testsuite"]
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    bad = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
           if c.find("failure") is not None or c.find("error") is not None]
    out = [f"Tests: {passed} passed, {n['failures']} failed, {n['errors']} errors, "
           f"{n['skipped']} skipped in {float(suite.get('time', 0)):.0f} s"]
    out += [f"  not passed: {name}" for name in bad[:30]]
    if len(bad) > 30:
        out.append(f"  ... and {len(bad) - 30} more (tests.xml)")
    log = xml.with_name("tests.log")
    left_out = [s for s in log.read_text().splitlines() if s.startswith("not run: ")] \
        if log.exists() else []
    if left_out:
        out.append(f"  {len(left_out)} left out for want of a module (tests.log), e.g. "
                   + left_out[0].removeprefix("not run: "))
    return out


def section(what: str, make: Any, *args: Any) -> list[str]:
    """make(*args), or one line saying why that section is missing."""
    try:
        return make(*args)
    except Exception as err:
        return [f"{what}: not available ({type(err).__name__}: {err})"]


def summary(dir_: Path, parts: list[str], sweep: Path | None, elapsed: int | None) -> str:
    lines = [f"sweepgrok GPU check ({dir_})" + (f", {elapsed} s in all" if elapsed else "")]
    words, failed = [], []
    for text in parts:
        name, rc, secs, cap = parse_part(text)
        word, ok = part_line(name, rc, secs, cap)
        words.append(word)
        if not ok:
            failed.append(name)
    lines.append("parts: " + "; ".join(words))
    lines.append("failed parts: " + (", ".join(failed) if failed else "none"))
    lines.append("")
    lines += section("bench_trainer", lambda: trainer_lines(
        json.loads((dir_ / "bench_trainer.json").read_text())))
    lines += section("bench_seeds", lambda: seeds_lines(
        json.loads((dir_ / "bench_seeds.json").read_text())))
    lines += section("Ray grid", grid_lines, sweep)
    lines += section("Tests", test_lines, dir_ / "tests.xml")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--part", action="append", default=[], help="NAME=RC:SECONDS:CAP")
    ap.add_argument("--sweep", type=Path, default=None, help="the grid's sweep folder")
    ap.add_argument("--elapsed", type=int, default=None)
    args = ap.parse_args(argv)
    text = summary(args.dir, args.part, args.sweep, args.elapsed)
    (args.dir / "summary.txt").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
