"""Run every benchmark: ``python -m benchmarks.run [--quick] [--device cuda] [--only NAME ...]``.

Every module ``benchmarks/bench_*.py`` that defines ``main()`` is run, each in its own Python
process (torch thread settings, Ray and memory do not leak between benchmarks), one after the
other, with its output streamed. ``--quick`` is passed to the modules that accept it (their
source declares a ``--quick`` option); a module may instead define ``QUICK_ARGV``, a list of
arguments to use in quick mode. ``--device`` goes to the modules that declare that option.
The exit code is non-zero if any benchmark failed.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIRST = ("bench_trainer", "bench_seeds", "bench_ray")  # then the others, alphabetically


def discover() -> list[str]:
    """bench_* modules of this folder that define a top-level main()."""
    names = []
    for path in sorted(HERE.glob("bench_*.py")):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            names.append(path.stem)
    return sorted(names, key=lambda n: (FIRST.index(n) if n in FIRST else len(FIRST), n))


def quick_argv(name: str) -> list[str]:
    """The arguments that make `name` quick: its QUICK_ARGV, else --quick if it has one."""
    source = (HERE / f"{name}.py").read_text()
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "QUICK_ARGV" for t in node.targets):
            return [str(v) for v in ast.literal_eval(node.value)]
    return ["--quick"] if '"--quick"' in source else []


def run_one(name: str, argv: list[str]) -> int:
    code = (f"import sys; sys.argv = {[name, *argv]!r}; "
            f"from benchmarks.{name} import main; main()")
    return subprocess.call([sys.executable, "-c", code], cwd=HERE.parent)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="each benchmark's quick setting")
    ap.add_argument("--only", nargs="+", default=None, help="module names (bench_trainer ...)")
    ap.add_argument("--device", default=None, help="cpu or cuda, for benchmarks that take it")
    args = ap.parse_args(argv)
    names = discover()
    if args.only:
        unknown = set(args.only) - set(names)
        if unknown:
            ap.error(f"unknown benchmark(s) {sorted(unknown)}; available: {', '.join(names)}")
        names = [n for n in names if n in args.only]
    failed = []
    t_all = time.perf_counter()
    for name in names:
        bench_argv = quick_argv(name) if args.quick else []
        if args.device and '"--device"' in (HERE / f"{name}.py").read_text():
            bench_argv += ["--device", args.device]
        print(f"\n=== {name} {' '.join(bench_argv)}".rstrip(), flush=True)
        t0 = time.perf_counter()
        rc = run_one(name, bench_argv)
        print(f"=== {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        if rc:
            failed.append(name)
    print(f"\n{len(names) - len(failed)}/{len(names)} benchmarks ok in "
          f"{time.perf_counter() - t_all:.0f} s" + (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
