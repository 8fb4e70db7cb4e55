"""The objective-over-trials plot of a search (matplotlib imported lazily, inside the function).

Kept out of ``sweepgrok.plots`` (another owner's module); it could move there unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def plot_objective(
    values: Sequence[tuple[int, float, bool]],
    path: str | Path,
    *,
    budget: int,
    mode: str = "min",
    title: str = "",
) -> Path:
    """Objective of each complete trial (dots), best so far (step line), budget (dashed).

    `values` are (trial number, objective, censored). Censored trials (never grokked, or stopped
    by the time cap) are drawn hollow so that a reader does not take them for grok times.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    numbers = [n for n, _, _ in values]
    ys = [v for _, v, _ in values]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    grok = [(n, v) for n, v, c in values if not c]
    cens = [(n, v) for n, v, c in values if c]
    if grok:
        ax.scatter(
            [n for n, _ in grok],
            [v for _, v in grok],
            s=22,
            color="C0",
            label="grokked (median step)",
        )
    if cens:
        ax.scatter(
            [n for n, _ in cens],
            [v for _, v in cens],
            s=22,
            facecolors="none",
            edgecolors="C3",
            label="censored (capped, or > budget)",
        )
    best: list[float] = []
    for y in ys:
        better = not best or (y < best[-1] if mode == "min" else y > best[-1])
        best.append(y if better else best[-1])
    if numbers:
        ax.step(numbers, best, where="post", color="C2", label="best so far")
    ax.axhline(budget, color="grey", linestyle="--", linewidth=1, label=f"budget {budget}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial")
    ax.set_ylabel("objective (steps)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
