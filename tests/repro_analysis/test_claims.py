"""analysis.claims: the claims table from a runs.csv with known grok steps, end to end (the
comparisons, the Holm families, the verdicts, the cells), written between its markers."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from analysis import claims, quoted, verdicts
from analysis.claims import BEGIN, END, Claim

REPORT = """# Report

## Verdict rules (fixed)

The rules.

## Version 1

Old text.
"""

NORMS = ("layernorm", "rmsnorm", "sphere", "none", "tiny")


def run(norm: str, i: int, grok: float, collapse: float, fourier: float) -> dict:
    censored = math.isnan(grok)
    return {
        "run_id": f"{norm}-{i}",
        "status": "completed" if censored else "grokked",
        "steps_run": 5000 if censored else int(grok),
        "grok_step_95": grok,
        "delay_95": grok,
        "collapse_step": collapse,
        "collapse_to_grok_95": grok - collapse,
        "fourier_unembed_above_chance": fourier,
        "model.norm": norm,
        "train.seed": i,
        "train.max_steps": 5000,
    }


def write_runs(folder: Path) -> None:
    """LayerNorm and RMSNorm alike (1,000-1,050), the sphere 5x faster, no norm never grokking
    in 5,000 steps, 3 'tiny' runs."""
    rows = []
    for i in range(8):
        slow, fast = (1000.0, 200.0) if i < 4 else (1050.0, 250.0)
        rows.append(run("layernorm", i, slow, 800.0, 0.70))
        rows.append(run("rmsnorm", i, slow, 800.0, 0.70))
        rows.append(run("sphere", i, fast, 100.0, 0.72))
        rows.append(run("none", i, math.nan, math.nan, math.nan))
    rows += [run("tiny", i, 300.0, 100.0, 0.6) for i in range(3)]
    (folder / "mysweep").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "mysweep" / "runs.csv", index=False)


def norm(name: str) -> str:
    return f"model.norm={name}"


CLAIMS = (
    Claim("Sphere faster", "22x", "mysweep", norm("sphere"), norm("layernorm"), factor=22),
    Claim("RMS = LN", "51,240 vs 54,160", "mysweep", norm("rmsnorm"), norm("layernorm"), "equal"),
    Claim("Sphere vs none", "22x", "mysweep", norm("sphere"), norm("none"), factor=22),
    Claim("Sphere succeeds", "100%", "mysweep", norm("sphere"), norm("none"), "success"),
    Claim("Control", "fails", "mysweep", norm("sphere"), norm("none"), "slower"),
    Claim("Tiny faster", "yes", "mysweep", norm("tiny"), norm("layernorm")),
    Claim("Collapse first", "yes", "mysweep", norm("sphere"), kind="precedes"),
    Claim("Collapses earlier", "yes", "mysweep", norm("sphere"), norm("layernorm"), "measure",
          measure="collapse_step"),
    Claim("Same features", "FFT", "mysweep", norm("sphere"), norm("layernorm"), "fourier",
          measure="fourier_unembed_above_chance"),
    Claim("Missing measure", "-", "mysweep", norm("sphere"), norm("layernorm"), "measure",
          measure="deff_final"),
)  # fmt: skip
EXPECTED = (
    verdicts.SIZE_NOT,  # 4.56x against the paper's 22x
    verdicts.REPRODUCED,
    verdicts.SIZE_NOT,  # the bound > 22.22x is past the paper's 22x
    verdicts.REPRODUCED,
    verdicts.NOT_TESTED,
    verdicts.DIRECTION_ONLY,
    verdicts.REPRODUCED,
    verdicts.DIRECTION_REPRODUCED,  # no factor in the paper
    verdicts.REPRODUCED,
    verdicts.NOT_TESTED,
)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> list[list[str]]:
    """The claims table of CLAIMS as cells, one list per claim."""
    folder = tmp_path_factory.mktemp("summaries")
    write_runs(folder)
    text = claims.claims_table(CLAIMS, folder)
    lines = text.strip().splitlines()[2:]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]


def test_every_claim_gets_its_verdict(table: list[list[str]]) -> None:
    assert len(table) == len(CLAIMS)
    verdict_words = [cells[5].split("**")[1] for cells in table]
    assert verdict_words == list(EXPECTED)


def test_the_cells_carry_the_estimate_ci_n_and_the_papers_number(table) -> None:
    claim, paper, ours, fits, when, verdict = table[0]
    assert (claim, paper) == ("Sphere faster (`mysweep`)", "22x")
    # Medians 1,025 and 225 (R's midpoint convention at S = 0.5): 4.56x.
    assert ours.startswith("grok at 0.95: 4.56x [")
    assert fits.startswith("no (the paper's 22x; CI [")
    assert when == "post hoc"  # a Claim is post hoc unless it says otherwise
    assert "norm=layernorm 1,025 (n = 8) vs norm=sphere 225 (n = 8)" in ours
    assert ours.endswith("; code unknown (before provenance)")  # the fixture has no git_commit
    assert verdict.startswith("**direction reproduced, size not** (p Holm = ")
    assert "the paper's 22x outside CI" in verdict
    assert table[1][3] == "- (no factor in the paper)"


def test_a_censored_baseline_is_a_bound(table) -> None:
    ours = table[2][2]
    assert ours.startswith("grok at 0.95: > 22.22x (a bound); KM medians")
    assert table[2][3] == "no (the paper's 22x; ours a bound, > 22.22x)"
    assert "norm=none > 5,000 (n = 8)" in ours
    assert table[4][5] == "**not tested** (the baseline does not grok within the budget)"


def test_the_other_kinds_cells(table) -> None:
    assert table[3][2].startswith("grokked at 0.95: 0/8 (norm=none) vs 8/8 (norm=sphere); Fisher p")
    assert table[5][5] == f"**{verdicts.DIRECTION_ONLY}** (n = 3 < 8)"
    assert table[6][2].startswith("8 of 8 runs with collapse_to_grok_95 > 0")
    assert "sign test p = 0.0039" in table[6][2]
    assert table[7][2].startswith("collapse_step: ratio of medians 8.00x [8.00, 8.00]")
    assert "lowest run 0.70" in table[8][2]
    assert table[9][5] == "**not tested** (no deff_final column in runs.csv)"


def test_holm_runs_over_the_tested_rows_of_the_whole_table(table) -> None:
    tested = [cells for cells in table if "p Holm = " in cells[2]]
    assert len(tested) == 8  # every row but the two not tested
    # The sign test's 1/256 is the 6th smallest of the 8 p-values (five are below 1e-3, the
    # 'tiny' log-rank's 0.0061 and the equivalence row's are above): Holm multiplies it by 3.
    assert "sign test p = 0.0039; p Holm = 0.012" in table[6][2]
    assert "log-rank p = 0.0061; p Holm = 0.012" in table[5][2]  # 7th: 2 x 0.0061


def test_each_family_is_adjusted_apart_and_named_in_its_rows(tmp_path: Path) -> None:
    """The fixture's 8 tested rows split 6 + 2: the control family's two p-values (the
    sphere-vs-layernorm log-rank's, below 1e-3, and the sign test's 1/256) are adjusted by
    m = 2, not by the whole table's 8 (hand-computed: the sign test's is the larger of two, so
    its p Holm is 1 x 1/256 = 0.0039, where the whole table gave 3 x 1/256 = 0.012, test
    above)."""
    write_runs(tmp_path)
    control = claims.OUR_CONTROLS
    split = [replace(c, family=control) if i in (0, 6) else c for i, c in enumerate(CLAIMS)]
    lines = claims.claims_table(split, tmp_path).strip().splitlines()[2:]
    cells = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines]
    assert "sign test p = 0.0039; p Holm = 0.0039 (family our controls, m = 2)" in cells[6][2]
    assert cells[5][2].endswith(f"(family {claims.PAPER_CLAIMS}, m = 6); code unknown (before "
                                "provenance)")  # fmt: skip
    assert "p Holm" not in cells[4][2]  # not tested: in no family


def test_a_failure_claim_gives_the_rates_and_the_grok_steps_of_each_group(tmp_path: Path) -> None:
    """A ``fails`` claim: the success rates, Fisher's p, and the steps of the runs that
    grokked (the ones against the claim); one grokking run: not in the paper's direction."""
    write_runs(tmp_path)
    claim = Claim("Tiny fails", "fails", "mysweep", norm("tiny"), norm("none"), "fails")
    (line,) = claims.claims_table([claim], tmp_path).strip().splitlines()[2:]
    cells = [c.strip() for c in line.strip("|").split(" | ")]
    assert cells[2].startswith("grokked at 0.95: 0/8 (norm=none) vs 3/3 (norm=tiny); Fisher p")
    assert "; grok steps norm=tiny: 300, 300, 300; norm=none: none;" in cells[2]
    assert cells[5] == "**not tested** (the baseline does not grok within the budget)"
    claim = replace(claim, group=norm("sphere"), baseline=norm("tiny"))
    (line,) = claims.claims_table([claim], tmp_path).strip().splitlines()[2:]
    assert "**not in the paper's direction** (8/8 grokked where the claim says" in line


def test_the_report_puts_controls_and_grokfast_apart_from_the_paper_claims() -> None:
    """Rules v4's families: a row the paper does not claim (our control) or a Grokfast row
    is never in the paper claims' family; every other row is."""
    for claim in claims.CLAIMS:
        assert claim.family in claims.FAMILIES, claim.text
        if claim.paper == claims.CONTROL:
            assert claim.family == claims.OUR_CONTROLS, claim.text
        elif "grokfast" in claim.sweep:
            assert claim.family == claims.GROKFAST_ROWS, claim.text
        else:
            assert claim.family == claims.PAPER_CLAIMS, claim.text


def test_writing_twice_gives_the_same_report(tmp_path: Path) -> None:
    write_runs(tmp_path)
    report = tmp_path / "REPRODUCTION.md"
    report.write_text(REPORT)
    assert claims.write_claims(CLAIMS[:2], tmp_path, report)
    first = report.read_text()
    assert not claims.write_claims(CLAIMS[:2], tmp_path, report)
    assert report.read_text() == first
    assert first.count(BEGIN) == first.count(END) == 1
    # Right after the rules section, before the next one; the rest of the report kept.
    assert first.index("The rules.") < first.index(BEGIN) < first.index(END)
    assert first.index(END) < first.index("## Version 1")
    assert first.startswith(REPORT[: REPORT.index("## Version 1")])
    assert first.endswith("## Version 1\n\nOld text.\n")


def test_a_changed_claim_replaces_the_table_between_the_markers(tmp_path: Path) -> None:
    write_runs(tmp_path)
    report = tmp_path / "REPRODUCTION.md"
    report.write_text(REPORT)
    claims.write_claims(CLAIMS[:1], tmp_path, report)
    claims.write_claims(CLAIMS[5:6], tmp_path, report)
    text = report.read_text()
    assert "Tiny faster" in text and "Sphere faster" not in text
    assert text.count(BEGIN) == 1


def test_the_cli_exits_2_naming_the_file_and_the_claim(tmp_path: Path, capsys) -> None:
    write_runs(tmp_path)
    report = tmp_path / "REPRODUCTION.md"
    report.write_text(REPORT)
    argv = ["--summaries", str(tmp_path), "--report", str(report)]
    bad = Claim("Nothing", "-", "mysweep", norm("cube"), norm("layernorm"))
    assert claims.main(argv, [bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: mysweep/runs.csv: claim 'Nothing': ") and "cube" in err
    gone = Claim("Gone", "-", "nosweep", norm("sphere"), norm("layernorm"))
    assert claims.main(argv, [gone]) == 2
    assert "nosweep/runs.csv: no such file" in capsys.readouterr().err
    assert report.read_text() == REPORT
    assert claims.main(argv, CLAIMS[5:6]) == 0
    assert BEGIN in report.read_text()


def test_a_planned_claim_without_its_runs_is_not_tested_yet(tmp_path: Path, capsys) -> None:
    """A planned claim is committed before its data (the rules): until its runs.csv exists its
    row says so; a post-hoc claim without runs.csv is still an error."""
    write_runs(tmp_path)
    planned = Claim("Later", "9x", "nosweep", norm("sphere"), norm("layernorm"), factor=9,
                    planned=True, when="claim abc1234")
    text = claims.claims_table([CLAIMS[0], planned], tmp_path)
    row = text.strip().splitlines()[-1]
    assert f"**{verdicts.NOT_TESTED}** ({claims.AWAITING})" in row
    assert "the paper's 9x" not in row.split(" | ")[2]  # 'ours' is '-'
    # The first row's Holm family is itself alone: the awaiting row is no test.
    assert "p Holm = " in text.strip().splitlines()[2]
    report = tmp_path / "REPRODUCTION.md"
    report.write_text(REPORT)
    unplanned = replace(planned, planned=False)
    assert claims.main(["--summaries", str(tmp_path), "--report", str(report)], [unplanned]) == 2
    assert "nosweep/runs.csv: no such file" in capsys.readouterr().err


def test_the_reports_claims_point_at_committed_summaries() -> None:
    summaries = claims.HERE / "reproduction"
    for claim in claims.CLAIMS:
        if claims.awaits_runs(claim, summaries):  # planned, its data not in yet
            continue
        for sweep in claim.sweep.split("+"):
            assert (summaries / sweep / "runs.csv").is_file(), sweep
        assert claim.kind in verdicts.KINDS
        assert claim.baseline or claim.kind == "precedes"


def test_every_claim_says_planned_or_post_hoc_with_its_evidence() -> None:
    for claim in claims.CLAIMS:
        assert claim.when, claim.text
    cells = [claims.planned_cell(c) for c in claims.CLAIMS]
    assert all(c.startswith(("planned (", "post hoc (")) for c in cells)
    # The second Fourier row came after the paper-1 twin's summary was committed.
    second = next(c for c in claims.CLAIMS if "uniform vs softmax" in c.text)
    assert not second.planned


def test_cells_keep_fractions_and_round_steps() -> None:
    """A measure in [0, 1] (Fourier concentration) keeps two decimals; steps are integers."""
    from analysis.claims import _num

    assert _num(0.8712) == "0.87"
    assert _num(2300.0) == "2,300"
    assert _num(float("nan")) == "-"


def test_the_committed_claims_table_is_what_the_summaries_give() -> None:
    """REPRODUCTION.md's table is not edited by hand: it equals what `python -m analysis.claims`
    computes from the committed runs.csv files (rerun it after changing a claim or a summary)."""
    report = claims.HERE / "REPRODUCTION.md"
    text = report.read_text()
    table = claims.claims_table(claims.CLAIMS, claims.HERE / "reproduction")
    assert claims.with_table(text, table) == text, "run: python -m analysis.claims"


# ---------------------------------------------------------------- quoted figures


def test_every_quoted_figure_matches_its_summary() -> None:
    """The run-derived numbers of the prose (REPRODUCTION.md, README.md, the accelerators'
    README) equal what analysis.quoted computes from the committed summaries, and every copied
    report-table row is a row of a committed report.md (run: python -m analysis.quoted)."""
    assert quoted.stale() == []
    assert quoted.copied_rows() == []


def test_a_stale_figure_or_row_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for doc in (quoted.REPRODUCTION, quoted.ACCELERATORS, "README.md", "docs/speed.md"):
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / doc).write_text((quoted.ROOT / doc).read_text())
    report = tmp_path / quoted.REPRODUCTION
    text = report.read_text()
    assert text.count("**GeomDR (tail)** 3.73x") == 1
    report.write_text(text.replace("**GeomDR (tail)** 3.73x", "**GeomDR (tail)** 3.74x"))
    monkeypatch.setattr(quoted, "ROOT", tmp_path)
    assert quoted.stale() == [
        f"{quoted.REPRODUCTION}: **GeomDR (tail)** 3.73x [3.00, 4.14] sooner than the baseline, "
        "whose 4,100-step median"
    ]
    row = "| 4,238 ± 178 |"
    assert report.read_text().count(row) == 1
    report.write_text(report.read_text().replace(row, "| 4,239 ± 178 |"))
    assert [r.split(" | ")[0] for r in quoted.copied_rows()] == ["| false"]


def test_docs_reproduction_refers_to_the_report_instead_of_copying_figures() -> None:
    """docs/reproduction.md names where the numbers are; it quotes none (one source)."""
    text = (quoted.ROOT / "docs" / "reproduction.md").read_text()
    assert "analysis/REPRODUCTION.md" in text
    assert re.findall(r"\d\.\d+x|\d,\d{3} steps|p = 0\.\d", text) == []


def test_a_factor_inside_the_ci_of_an_unshown_direction_is_not_called_agreement() -> None:
    # The Transformer's GeomDR row: 0.95x [0.65, 2.19] against the paper's 2x.
    row = verdicts.Row("faster", estimate=0.95, lo=0.65, hi=2.19, factor=2.0, n_group=8,
                       n_baseline=8, p=0.98, p_holm=1.0)
    v = verdicts.verdict(row)
    assert v.verdict == verdicts.NOT_IN_DIRECTION
    cell = claims.size_cell(row, v.verdict)
    assert cell.startswith("yes (the paper's 2x; CI [0.65, 2.19])")
    assert cell.endswith("the direction is not shown: the size is not judged")
    shown = verdicts.Row("faster", estimate=1.9, lo=1.5, hi=2.4, factor=2.0, n_group=8,
                         n_baseline=8, p=0.001, p_holm=0.001)
    assert verdicts.verdict(shown).verdict == verdicts.REPRODUCED
    assert claims.size_cell(shown, verdicts.REPRODUCED) == "yes (the paper's 2x; CI [1.50, 2.40])"


def test_a_factor_outside_the_ci_of_an_unshown_direction_is_not_judged_either() -> None:
    # The slow-regime GeomDR row: 3.05x [1.04, 7.50], p Holm 1, against the paper's 52x.
    row = verdicts.Row("faster", estimate=3.05, lo=1.04, hi=7.50, factor=52.0, n_group=8,
                       n_baseline=8, p=0.27, p_holm=1.0)
    v = verdicts.verdict(row)
    assert v.verdict == verdicts.DIRECTION_ONLY
    assert claims.size_cell(row, v.verdict) == (
        "no (the paper's 52x; CI [1.04, 7.50]), but the direction is not shown: the size is not "
        "judged")
    shown = verdicts.Row("faster", estimate=3.6, lo=2.5, hi=5.0, factor=52.0, n_group=8,
                         n_baseline=8, p=0.0002, p_holm=0.001)
    assert verdicts.verdict(shown).verdict == verdicts.SIZE_NOT
    assert claims.size_cell(shown, verdicts.SIZE_NOT) == "no (the paper's 52x; CI [2.50, 5.00])"


def test_a_size_cell_without_an_estimate_says_so() -> None:
    nan = math.nan
    row = verdicts.Row("faster", estimate=nan, lo=nan, hi=nan, factor=43.84, n_group=8,
                       n_baseline=8, p=1.0, p_holm=1.0)
    assert claims.size_cell(row, verdicts.verdict(row).verdict) == (
        "unknown (the paper's 43.84x; no estimate: both medians beyond the runs)")


def test_a_claim_of_no_delay_prints_the_groups_median_delay(tmp_path: Path) -> None:
    # The fixture's delay is the grok step (fit at 0): the sphere's are 200 x 4 and 250 x 4,
    # median 225, and no bootstrap resample's median leaves [200, 250].
    write_runs(tmp_path)
    claim = Claim("Sphere groks sooner", "no delay", "mysweep", norm("sphere"), norm("layernorm"),
                  delay=True)
    ours = claims.compare_claim(claim, claims.load_summary("mysweep", tmp_path)).ours
    assert ours.endswith("; median delay norm=sphere 225 [200, 250] steps")
    plain = claims.compare_claim(replace(claim, delay=False),
                                 claims.load_summary("mysweep", tmp_path)).ours
    assert "delay" not in plain


def test_a_train_summary_joins_a_report_summary(tmp_path: Path) -> None:
    # The H200 LayerNorm arm's runs.csv has `sweepgrok train`'s columns (grok_step, censored).
    write_runs(tmp_path)
    (tmp_path / "paper1_layernorm_h200").mkdir()
    pd.DataFrame({
        "run_id": ["a", "b"], "status": ["grokked", "censored"], "grok_step": [50800.0, None],
        "fit_step": [1200, 1000], "steps_run": [50800, 83400], "censored": [False, True],
        "model.norm": ["slow", "slow"], "train.seed": [1, 2],
    }).to_csv(tmp_path / "paper1_layernorm_h200" / "runs.csv", index=False)  # fmt: skip
    runs = claims.load_summary("mysweep+paper1_layernorm_h200", tmp_path)
    slow = runs[runs["model.norm"] == "slow"]
    assert len(runs) == 35 + 2
    assert slow["grok_step_95"].tolist()[0] == 50800
    assert slow["censored_95"].tolist() == [False, True]
    assert slow["delay_95"].tolist()[0] == 49600
    claim = Claim("Sphere faster than slow", "-", "mysweep+paper1_layernorm_h200", norm("sphere"),
                  norm("slow"))
    # S(t) falls to 0.5 at 50,800 and stays there up to the run censored at 83,400: R's
    # quantile.survfit takes the midpoint, 67,100.
    assert "norm=slow 67,100 (n = 2)" in claims.compare_claim(claim, runs).ours
