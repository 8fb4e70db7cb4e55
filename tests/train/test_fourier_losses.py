"""Nanda et al.'s restricted and excluded losses and the key-frequency rule, against logits and
embeddings built by hand from known frequencies, and against a least-squares projection."""

import math

import pytest
import torch
import torch.nn.functional as F

from sweepgrok.analysis import definitions
from sweepgrok.config.tasks import operation_table
from sweepgrok.train import fourier_losses as fl

P = 11


def _answers(task: str) -> torch.Tensor:
    return operation_table(task, P)[1]


def _wave(answers: torch.Tensor, k: int, phase: float = 0.0) -> torch.Tensor:
    """Logits (p^2, p) = cos(w_k (s - c) + phase), s the pair's answer, c the class."""
    r = (answers[:, None] - torch.arange(P)).double()
    return torch.cos(2 * math.pi * k * r / P + phase)


def _losses(logits, answers, freqs):
    restricted, excluded = fl.restricted_and_excluded_logits(logits, answers, torch.tensor(freqs))
    return F.cross_entropy(restricted, answers).item(), F.cross_entropy(excluded, answers).item()


@pytest.mark.parametrize("task", ["add", "sub"])
def test_logits_made_of_a_key_frequency(task):
    s = _answers(task)
    logits = 60.0 * _wave(s, 3, phase=0.1)  # a phase mixes the cosine and sine directions
    restricted, excluded = _losses(logits, s, [3])
    assert restricted == pytest.approx(F.cross_entropy(logits, s).item(), abs=1e-9)
    assert restricted < 0.1  # the logits answer correctly: the full loss is low
    assert excluded == pytest.approx(math.log(P), abs=1e-9)  # nothing left: uniform


def test_logits_with_no_energy_at_the_key_frequencies():
    s = _answers("add")
    logits = 6.0 * _wave(s, 2)
    restricted, excluded = _losses(logits, s, [3, 5])
    assert restricted == pytest.approx(math.log(P), abs=1e-9)  # nothing kept: uniform
    assert excluded == pytest.approx(F.cross_entropy(logits, s).item(), abs=1e-9)


def test_the_class_means_stay_with_the_restricted_logits():
    # A per-class bias b(c) (the same for every pair) is kept by the restricted logits, as the
    # paper's bias correction keeps it, and untouched by the exclusion.
    s = _answers("sub")
    bias = torch.linspace(-1.0, 1.0, P).double()
    wave = 4.0 * _wave(s, 4)
    restricted, excluded = fl.restricted_and_excluded_logits(wave + bias, s, torch.tensor([4]))
    torch.testing.assert_close(restricted, wave + bias)
    torch.testing.assert_close(excluded, bias.expand_as(wave))


@pytest.mark.parametrize("task", ["add", "sub"])
def test_the_part_is_the_least_squares_projection(task):
    # Over all (pair, c): project on the span of cos / sin(w_k (s - c)) for k = 2, 5 and the
    # per-class indicators; the restricted logits are that projection, the excluded ones the
    # logits minus its wave part.
    s = _answers(task)
    logits = torch.randn(P * P, P, generator=torch.Generator().manual_seed(0)).double()
    r = (s[:, None] - torch.arange(P)).double().flatten()
    waves = [f(2 * math.pi * k * r / P) for k in (2, 5) for f in (torch.cos, torch.sin)]
    classes = torch.eye(P).double().repeat(P * P, 1)  # row (pair, c) -> indicator of c
    basis = torch.cat([torch.stack(waves, 1), classes], 1)
    coef = torch.linalg.lstsq(basis, logits.flatten()).solution
    want_restricted = (basis @ coef).view(P * P, P)
    want_part = (basis[:, :4] @ coef[:4]).view(P * P, P)
    freqs = torch.tensor([5, 2, 0])  # 0: padding, ignored
    restricted, excluded = fl.restricted_and_excluded_logits(logits, s, freqs)
    torch.testing.assert_close(restricted, want_restricted, rtol=0, atol=1e-10)
    torch.testing.assert_close(excluded, logits - want_part, rtol=0, atol=1e-10)


def test_members_are_independent():
    s = _answers("add")
    logits = torch.stack([6.0 * _wave(s, 3), 6.0 * _wave(s, 1)])  # (E = 2, p^2, p)
    answers = s.expand(2, -1)
    restricted, _ = fl.restricted_and_excluded_logits(logits, answers, torch.tensor([[3], [3]]))
    torch.testing.assert_close(restricted[0], logits[0])  # member 0: all in its key frequency
    torch.testing.assert_close(restricted[1], torch.zeros_like(logits[1]), rtol=0, atol=1e-12)


def test_the_logits_of_every_pair_are_needed():
    s = _answers("add")
    with pytest.raises(ValueError, match="all p\\^2 = 121 pairs"):
        fl.key_frequency_part(_wave(s, 1)[:-1], s[:-1], torch.tensor([1]))


def _embedding(energies: dict[int, float], d_extra: int = 0) -> torch.Tensor:
    """(p, 2 * len + d_extra) embedding: for each frequency k a cosine and a sine column whose
    energies (sum over both columns of |DFT|^2 at k and p - k) are in the ratio given."""
    t = torch.arange(P)[:, None].double()
    cols = [math.sqrt(e) * f(2 * math.pi * k * t / P)
            for k, e in energies.items() for f in (torch.cos, torch.sin)]
    return torch.cat([*cols, torch.zeros(P, d_extra).double()], 1)


def test_key_frequencies_the_fewest_holding_the_share():
    # Energies 0.80, 0.15, 0.05 of the total: 0.80 < 0.9 <= 0.95, so the two strongest.
    w = _embedding({4: 0.80, 1: 0.15, 2: 0.05})
    assert fl.key_frequencies(w).tolist() == [4, 1, 0, 0, 0]  # cap min(8, p // 2 = 5), padded
    # Just below and just above the strongest's share (0.80 "exactly" is a float knife edge:
    # the DFT's rounding decided it differently on two machines).
    assert fl.key_frequencies(w, share=0.799).tolist() == [4, 0, 0, 0, 0]
    assert fl.key_frequencies(w, share=0.801).tolist() == [4, 1, 0, 0, 0]
    assert fl.key_frequencies(w, share=0.96).tolist() == [4, 1, 2, 0, 0]
    assert fl.key_frequencies(w, cap=1).tolist() == [4]


def test_key_frequencies_capped_and_empty():
    spread = _embedding({k: 1.0 for k in range(1, 6)})  # even: 0.9 needs all 5
    assert sorted(fl.key_frequencies(spread).tolist()) == [1, 2, 3, 4, 5]
    assert len(fl.key_frequencies(spread, cap=3).tolist()) == 3
    constant = torch.ones(P, 4)  # no non-constant energy: no key frequency
    assert fl.key_frequencies(constant).tolist() == [0, 0, 0, 0, 0]
    batched = torch.stack([_embedding({3: 1.0}, d_extra=2), _embedding({2: 0.5, 5: 0.5})])
    assert fl.key_frequencies(batched, cap=2).tolist() == [[3, 0], [2, 5]]
    with pytest.raises(ValueError, match="share"):
        fl.key_frequencies(spread, share=0.0)


def test_the_documented_rule_is_the_code():
    # The definitions the reports print state the rule's numbers: they must be the code's.
    text = dict(definitions.DEFINITIONS)["restricted / excluded loss"]
    assert f"hold {fl.KEY_SHARE:.0%} of its non-constant energy, at most {fl.MAX_KEY_FREQS}" in text
