"""The definitions of every number a report shows, written once.

The Markdown report, the HTML report and the definitions list of docs/statistics.md show this
text (tests/analysis/test_html_report.py fails when the docs' list differs from it). Inline
Markdown only: `code` and **bold**, which the HTML report turns into tags. The group summary's
numbers are defined where their columns are declared (sweepgrok.analysis.summary_columns), and
every threshold is the declared value (sweepgrok.config.thresholds, sweepgrok.train.events),
never written here again.
"""

from __future__ import annotations

from sweepgrok.analysis import summary_columns
from sweepgrok.config.thresholds import GROK_STEP_COLUMNS
from sweepgrok.train.events import COLLAPSE_FRACTION, FIT_THRESHOLD


def _listed(words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


_RECORDED_AT = _listed([f"{theta:g}" for theta in GROK_STEP_COLUMNS.values()])
_GROK_COLUMNS = ", ".join(f"`{name}`" for name in GROK_STEP_COLUMNS)

DEFINITIONS: tuple[tuple[str, str], ...] = (
    (
        "fit step",
        f"first evaluation where train accuracy ≥ `train.fit_threshold` ({FIT_THRESHOLD:g}).",
    ),
    (
        "grok step at θ",
        f"first evaluation where test accuracy ≥ θ, recorded at {_RECORDED_AT} ({_GROK_COLUMNS}); "
        "`grok_step` is the one at `train.grok_threshold`.",
    ),
    ("grokking delay", "grok step − fit step."),
    (
        "censored",
        "a run that reached its budget (or a search's time cap) without grokking. Its grok time "
        'is "> steps_run", never dropped. A diverged or failed run can never grok: it is '
        "censored at its budget (`train.max_steps`), so it stays in every risk set, and counts "
        "as not grokked in the success rate.",
    ),
    *summary_columns.definitions(),  # success rate, median grok step and delay, KM median
    (
        "speed-up",
        "baseline KM median / group KM median, with a seeded 95% percentile bootstrap CI, "
        "against the baseline of the same stratum (the same values of the other grouping keys, "
        "save those that change with the baseline's keys). "
        '"> x": the baseline has no median and x is a lower bound; "< x" is the mirror case.',
    ),
    (
        "p",
        "two-sided log-rank test of the group against its baseline, by permutation: the "
        "statistic U²/V recomputed for every relabelling, exact when there are at most 20,000 "
        "relabellings (a seeded Monte Carlo of 10,000 above, ± its standard error). **p Holm**: "
        "Holm's step-down adjustment over the table's comparisons. "
        "**Paired**: runs matched by seed, the log-rank stratified by seed.",
    ),
    (
        "collapse onset",
        "first evaluation, from the fit step on, where D_eff (last hidden layer) falls below "
        f"`geometry.collapse_fraction` ({COLLAPSE_FRACTION:g}) of its running maximum since the "
        "fit step; "
        "**collapse-to-grok gap** = grok step − collapse onset.",
    ),
    (
        "D_eff",
        "the participation ratio (Σ μ_i)² / Σ μ_i² of the covariance eigenvalues of the centred "
        "representations; **ρ** = mean Euclidean distance to the k nearest neighbours of the "
        "L2-normalized representations; **Fourier concentration** = energy share of the top "
        "frequencies of the token embedding (FFT over the vocabulary axis) and of the effective "
        "unembedding (over the classes), raw and above chance.",
    ),
    (
        "progress measures",
        "per evaluation, on the training split unless named: **weight norm per group**, the "
        "L2 norm of the token embedding, the positional embedding, the unembedding and, per "
        "Transformer layer, of W_Q, W_K, W_V, W_O, (W_in, b_in) and (W_out, b_out); **logit "
        "norm**, the mean over examples of ‖z‖₂, z an example's logits; **softmax-collapse "
        "share**, the fraction of examples whose float32 loss (`optim.loss`) is exactly 0 "
        "(Prieto et al. 2025); **attention entropy**, per layer and head, the mean over "
        "examples of −Σ_s p_s ln p_s of the readout position's attention over the 3 positions "
        "(ln 3 for uniform attention); **test D_eff**, D_eff of the test split's fixed "
        "subsample, drawn by the training split's rule.",
    ),
    (
        "restricted / excluded loss",
        "Nanda et al. 2023's progress measures (Transformer on `add` or `sub`). The logits of "
        "all p² pairs are projected onto cos(w_k (s − c)) and sin(w_k (s − c)), s the answer, c "
        "the class, w_k = 2πk/p, for the key frequencies k: the **restricted loss** (test split) "
        "keeps only that part plus each class's mean logit, the **excluded loss** (training "
        "split) removes it. **Key frequencies** (`key_freqs`): the fewest strongest frequencies "
        "of the token embedding's Fourier spectrum that hold 90% of its non-constant energy, at "
        "most 8, read at each evaluation.",
    ),
    (
        "GeomDR",
        "the loss L = L_task + λ(t) Σ_layers Σ_{j > d*} μ_j, with λ(t) = 0 before t_s, then "
        "λ_max (1 − cos(π min(1, (t − t_s)/T_ramp)))/2. Two controls separate dimension from "
        "activation scale (`geomdr.penalty`): `tail_fraction` penalizes Σ_{j > d*} μ_j / Σ_j μ_j "
        "per layer (scale-free, in [0, 1], so λ_max is on another scale than the tail's) and "
        "`trace` penalizes Σ_j μ_j (the total variance, no d*); the `geomdr_loss` column logs "
        "the kind trained.",
    ),
)
"""(term, its definition in inline Markdown), in reading order."""


def markdown() -> str:
    """The definitions as a Markdown list, one item per term."""
    return "\n".join(f"- **{term}**: {text}" for term, text in DEFINITIONS)
