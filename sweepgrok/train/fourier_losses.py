"""Nanda et al. 2023's progress measures: the restricted and the excluded loss.

"Progress measures for grokking via mechanistic interpretability" (ICLR 2023) shows that a
Transformer that groks modular addition computes its logits from a few key frequencies w_k =
2 pi k / p as ``sum_k alpha_k cos(w_k (a + b - c))``. Two losses track that circuit:

- **restricted loss**: the loss after keeping only the key-frequency part of the logits (the
  directions cos(w_k (s - c)) and sin(w_k (s - c)), s = the answer, for the key k) plus each
  class's mean logit over the pairs (the paper's bias correction), on the test split. In the
  paper it falls during "circuit formation", before the test loss does.
- **excluded loss**: the loss after removing that part, on the training split. In the paper it
  rises during circuit formation while the training loss stays flat: the training set is
  answered more and more by the circuit, less by memorisation.

The logits are a function of (pair, c) over all p^2 pairs (train and test: the projection needs
every pair) and p classes. With s the pair's answer, every function of (s - c) mod p is constant
on the level sets {(pair, c): s - c = r}, each of which holds exactly one c per pair, so the
projection onto those functions is the mean over each level set, a profile over r in Z_p; the
key-frequency part is that profile filtered to the key frequencies (an FFT over r), read back at
r = s - c. For add and sub every answer occurs p times, so this part has zero mean over the
pairs for each class and is orthogonal to the per-class means kept by the restricted logits.

Key frequencies: read from the token embedding (``key_frequencies``), since the embedding is
where the paper finds them (its figure of the embedding's Fourier norms). The paper picks them
once from the final model and tracks them through training; an online measure cannot see the
end, so here they are read anew at each evaluation. Early in training the embedding has no
sparse spectrum: the rule hits its cap and the key frequencies are the strongest of noise.

Pure functions with a leading batch shape ``...`` (one entry per member); nothing here reads a
config or syncs with the host.
"""

from __future__ import annotations

import torch
from torch import Tensor

from sweepgrok.train.geometry import frequency_energy

KEY_SHARE = 0.9
"""The key frequencies are the fewest strongest ones holding this share of the embedding's
non-constant Fourier energy."""

MAX_KEY_FREQS = 8
"""At most this many key frequencies (the paper's model at p = 113 uses 5); an embedding whose
energy is spread (at init) would otherwise make nearly every frequency a key one."""


def key_frequencies(w: Tensor, share: float = KEY_SHARE, cap: int = MAX_KEY_FREQS) -> Tensor:
    """The key frequencies of an embedding ``w`` (..., p, d), its p operand rows.

    Frequencies k = 1..p//2 are ranked by their energy (``geometry.frequency_energy``: the
    norm over the cosine and sine components and the model dimension, squared); the key ones
    are the fewest strongest whose energies sum to at least ``share`` of the total, at most
    ``cap``. Returns (..., min(cap, p//2)) int64, strongest first, padded with 0 (frequency 0 is
    never a key one); all 0 for an embedding with no non-constant energy.
    """
    if not 0.0 < share <= 1.0 or cap < 1:
        raise ValueError(f"need 0 < share <= 1 and cap >= 1 (got share={share}, cap={cap})")
    energy, has = frequency_energy(w)
    width = min(cap, energy.shape[-1])
    vals, idx = energy.sort(dim=-1, descending=True, stable=True)
    cum = vals.cumsum(dim=-1)
    # Frequencies before the one whose cumulative energy first reaches the share, plus it.
    count = (cum < share * cum[..., -1:]).sum(dim=-1) + 1
    count = torch.where(has, count.clamp(max=width), 0)
    keep = torch.arange(width, device=w.device) < count[..., None]
    return torch.where(keep, idx[..., :width] + 1, 0)


def key_frequency_part(logits: Tensor, answers: Tensor, freqs: Tensor) -> Tensor:
    """The component of ``logits`` (..., N, p) along cos(w_k (s - c)), sin(w_k (s - c)) for the
    key frequencies k in ``freqs`` (..., K) (0 entries are ignored); ``answers`` (..., N) are
    the pairs' answers s. The N rows must be all p^2 pairs of an additive task (each answer p
    times). Returns (..., N, p), the projection described in the module docstring."""
    p = logits.shape[-1]
    if logits.shape[-2] != p * p:
        raise ValueError(f"need the logits of all p^2 = {p * p} pairs, got {logits.shape[-2]}")
    classes = torch.arange(p, device=logits.device)
    offset = (answers[..., None] - classes) % p  # (..., N, p): r = s - c at (pair, c)
    # profile[r] = mean over pairs of the logit at c = s - r: the level-set means.
    profile = logits.gather(-1, offset).mean(dim=-2)  # (..., p)
    spectrum = torch.fft.rfft(profile, dim=-1)  # bins 0..p//2
    keep = torch.zeros(spectrum.shape, dtype=torch.bool, device=logits.device)
    keep = keep.scatter(-1, freqs, True)
    keep[..., 0] = False  # the padding, and the constant (kept by the class means instead)
    part = torch.fft.irfft(spectrum * keep, n=p, dim=-1)  # (..., p) as a function of r
    return part[..., None, :].expand(logits.shape).gather(-1, offset)


def restricted_and_excluded_logits(
    logits: Tensor, answers: Tensor, freqs: Tensor
) -> tuple[Tensor, Tensor]:
    """(restricted, excluded) logits of all p^2 pairs (see ``key_frequency_part``).

    Restricted: each class's mean logit over the pairs plus the key-frequency part. Excluded:
    the logits minus the key-frequency part (its mean over the pairs is already 0 per class,
    so the paper's bias correction changes nothing)."""
    part = key_frequency_part(logits, answers, freqs)
    return logits.mean(dim=-2, keepdim=True) + part, logits - part
