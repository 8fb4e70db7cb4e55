"""analysis/accelerator_summary.py: each run's arm, and the summary against its architecture's
baseline."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis import provenance_summaries as provenance
from analysis.accelerator_summary import ARM_KEY, arm, main
from sweepgrok.config.trial import Config, flatten, update
from sweepgrok.store.sink import ParquetSink

EVAL = 100
BASE_LABEL = "arch=transformer, arm=baseline"


def test_each_lever_names_its_arm() -> None:
    plain = flatten(Config())
    assert arm(plain) == "baseline"
    assert arm({**plain, "model.norm": "sphere"}) == "sphere"
    assert arm({**plain, "model.attention": "uniform"}) == "uniform"
    assert arm({**plain, "geomdr.enabled": True}) == "geomdr"
    assert arm({**plain, "grokfast.kind": "ma"}) == "grokfast"
    both = {**plain, "optim.loss": "stablemax", "optim.perpendicular_grad": True}
    assert arm(both) == "stablemax_perp"
    # one of the pair alone is not the published combination: it is the baseline's loss or step
    assert arm({**plain, "optim.loss": "stablemax"}) == "baseline"
    assert arm({**both, "model.norm": "sphere"}) == "sphere+stablemax_perp"
    assert arm({**both, "optim.weight_decay": 0.0}) == "stablemax_perp+wd0"


def write_sweep(root: Path) -> Path:
    """Transformer: baseline groks at 1,000-1,300, grokfast at 200-500; MLP: baseline at
    2,000-2,300, geomdr at 1,000-1,300; 4 seeds each."""
    sink = ParquetSink(root)
    arms = [
        ("transformer", {}, 1000),
        ("transformer", {"grokfast.kind": "ema"}, 200),
        ("mlp", {}, 2000),
        ("mlp", {"geomdr.enabled": True}, 1000),
    ]
    for a, (arch, levers, first) in enumerate(arms):
        for seed in range(4):
            rid, grok = f"r{a}-{seed}", first + 100 * seed
            cfg = update(Config(), {"model.arch": arch, "train.seed": seed, **levers})
            sink.write_metrics(
                {"run_id": rid, "step": k * EVAL, "train_acc": 1.0,
                 "test_acc": 1.0 if k * EVAL >= grok else 0.1}
                for k in range(grok // EVAL + 1)
            )
            sink.write_run(
                {**flatten(cfg), "run_id": rid, "status": "grokked", "steps_run": grok}
            )
    return root


def test_each_arm_is_compared_with_its_own_architecture(tmp_path: Path) -> None:
    sweep, out = write_sweep(tmp_path / "acc"), tmp_path / "out"
    assert main([str(sweep), "--out", str(out)]) == 0
    table = pd.read_csv(out / "groups_95.csv").set_index(["model.arch", ARM_KEY])
    assert table.loc[("transformer", "grokfast"), "baseline_group"] == BASE_LABEL
    # KM medians of 4 runs 100 apart: S = 0.5 from the 2nd event to the 3rd, so the median is
    # their midpoint (R's survfit convention): 1,150 / 350 and 2,150 / 1,150
    assert table.loc[("transformer", "grokfast"), "speedup"] == 1150 / 350
    assert table.loc[("mlp", "geomdr"), "speedup"] == 2150 / 1150
    assert (out / "figures" / "survival.png").stat().st_size > 0
    assert "arm" in (out / "report.md").read_text()
    # The fixture's run rows hold no provenance: runs.csv says so rather than guessing.
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["git_commit"]) == set(runs["sweepgrok_version"]) == {provenance.UNKNOWN}


def test_a_missing_sweep_exits_2(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "nothing")]) == 2
    assert "error:" in capsys.readouterr().err
