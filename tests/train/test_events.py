"""sweepgrok.train.events: the incremental tracker (trainer, search) and the vectorised version
(statistics) define the same events."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweepgrok.train import events


def tracked(steps, train, test, deff, fit=0.99, grok=0.99, fraction=0.5) -> events.RunTracker:
    tracker = events.RunTracker("r", grok, fit, fraction)
    for s, a, b, d in zip(steps, train, test, deff, strict=True):
        tracker.update(int(s), float(a), float(b), None if np.isnan(d) else float(d))
    return tracker


def test_random_curves_give_the_same_events_in_both_implementations() -> None:
    rng = np.random.default_rng(0)
    frames, trackers = [], {}
    for i in range(200):
        n = int(rng.integers(1, 30))
        steps = np.arange(n) * 50
        # Accuracies on a k / 20 grid in float32 (19/20 = 0.94999999), D_eff with NaN gaps.
        train = (rng.integers(0, 21, n) / 20).astype(np.float32).astype(float)
        test = (np.sort(rng.integers(0, 21, n)) / 20).astype(np.float32).astype(float)
        test[rng.random(n) < 0.2] = np.float32(0.99)
        deff = rng.uniform(1, 30, n)
        deff[rng.random(n) < 0.2] = np.nan
        rid = f"r{i:03d}"
        trackers[rid] = tracked(steps, train, test, deff)
        frames.append(
            pd.DataFrame(
                {"run_id": rid, "step": steps, "train_acc": train, "test_acc": test, "deff": deff}
            )
        )
    table = events.run_events(pd.concat(frames, ignore_index=True))
    for rid, t in trackers.items():
        row = table.loc[rid]
        for name, want in (
            ("fit_step", t.fit_step),
            ("grok_step_95", t.grok_step_95),
            ("grok_step_99", t.grok_step_99),
            ("collapse_step", t.collapse_step),
        ):
            got = None if pd.isna(row[name]) else int(row[name])
            assert got == want, (rid, name, got, want)
        assert row["peak_test_acc"] == t.peak_test_acc


def test_float32_accuracy_at_the_threshold_counts_in_the_tracker() -> None:
    acc = float(np.float32(19) / np.float32(20))  # 0.949999988079071
    assert acc < 0.95
    t = tracked([0, 100], [1.0, 1.0], [0.5, acc], [np.nan, np.nan], grok=0.95)
    assert t.grok_step == 100 and t.grok_step_95 == 100


def test_collapse_onset_is_looked_for_from_the_fit_step_on() -> None:
    steps = [0, 20, 40, 200, 400, 600, 800]
    train = [0.1, 0.2, 0.3, 1.0, 1.0, 1.0, 1.0]  # fit at 200
    # A start-up transient (30 -> 8 at step 20) and a real collapse after the fit (20 -> 9).
    deff = [30.0, 8.0, 12.0, 20.0, 18.0, 9.0, 5.0]
    t = tracked(steps, train, [0.0] * 7, deff)
    assert t.fit_step == 200 and t.collapse_step == 600
    metrics = pd.DataFrame(
        {"run_id": "a", "step": steps, "train_acc": train, "test_acc": 0.0, "deff": deff}
    )
    assert events.run_events(metrics).loc["a", "collapse_step"] == 600
    never_fit = tracked(steps, [0.1] * 7, [0.0] * 7, deff)
    assert never_fit.collapse_step is None
