"""Task tables and splits against hand-computed values (docs/statistics.md)."""

import pytest
import torch

from sweepgrok.config.tasks import (
    TASKS,
    Task,
    make_split,
    operation_table,
    parity_relevant_bits,
    s5_compose,
    s5_elements,
)
from sweepgrok.config.trial import ConfigError, from_flat


def _lookup(name, p):
    x, y = operation_table(name, p)
    return {(int(a), int(b)): int(c) for (a, b), c in zip(x, y, strict=True)}


def test_modular_tables_by_hand():
    add, sub, mul = _lookup("add", 7), _lookup("sub", 7), _lookup("mul", 7)
    assert len(add) == 49 and add[(5, 4)] == 2 and add[(0, 0)] == 0
    assert sub[(2, 5)] == 4 and sub[(5, 2)] == 3
    assert mul[(3, 5)] == 1 and mul[(6, 6)] == 1


def test_division_is_multiplication_by_the_inverse():
    div = _lookup("div", 7)
    assert len(div) == 7 * 6 and all(b != 0 for _, b in div)
    # 3 / 5 mod 7: 5^-1 = 3 (5*3 = 15 = 1 mod 7), so 3 * 3 = 9 = 2.
    assert div[(3, 5)] == 2
    assert all((c * b) % 7 == a for (a, b), c in div.items())
    assert div != {k: v for k, v in _lookup("mul", 7).items() if k[1]}  # not secretly mul


def test_s5_convention_apply_y_then_x():
    elems = s5_elements()
    assert len(elems) == 120 and elems[0] == (0, 1, 2, 3, 4)
    x, y = (1, 0, 2, 3, 4), (0, 2, 1, 3, 4)  # swap 0,1 and swap 1,2
    # (x o y)(i) = x[y[i]]: i=1 -> y:2 -> x:2 ; i=2 -> y:1 -> x:0
    assert s5_compose(x, y) == (1, 2, 0, 3, 4)
    assert s5_compose(y, x) == (2, 0, 1, 3, 4)  # non-abelian
    table = _lookup("s5", 0)
    ix = {e: i for i, e in enumerate(elems)}
    assert table[(ix[x], ix[y])] == ix[(1, 2, 0, 3, 4)]


def test_split_seeded_by_data_seed_only():
    cfg = from_flat({"task.p": 11, "task.train_fraction": 0.3}).task
    a, b = make_split(cfg, 0), make_split(cfg, 0)
    c = make_split(cfg, 1)
    assert torch.equal(a.train_x, b.train_x) and not torch.equal(a.train_x, c.train_x)
    assert a.train_x.shape == (round(0.3 * 121), 3) and a.test_x.shape[0] == 121 - 36
    assert (a.train_x[:, 2] == 11).all()  # the '=' token is p
    rows = {tuple(r) for r in a.train_x.tolist()} | {tuple(r) for r in a.test_x.tolist()}
    assert len(rows) == 121  # disjoint and complete


@pytest.mark.parametrize("name", [n for n, t in TASKS.items() if t.additive])
def test_additive_tasks_answer_every_value_equally_often(name):
    # What the restricted / excluded losses rely on (sweepgrok.train.fourier_losses): all p^2 pairs,
    # each answer p times.
    pairs, answers = operation_table(name, 7)
    assert len(pairs) == 49 and torch.bincount(answers, minlength=7).tolist() == [7] * 7


def test_registry_drives_config_and_tables():
    power = ["div_odd_sub", "sum_sq", "quad", "quad_x", "cube_xy", "cube_xy2_y"]
    assert list(TASKS) == ["add", "sub", "mul", "div", "s5", *power, "s5_conj", "s5_xyx",
                           "sparse_parity"]
    assert from_flat({"task.name": "s5", "task.p": 7}).task.n_tokens == 120
    assert from_flat({"task.name": "s5_conj", "task.p": 7}).task.n_tokens == 120
    assert from_flat({"task.name": "mul", "task.p": 7}).task.n_tokens == 7
    assert [n for n, t in TASKS.items() if t.needs_prime] == ["div", "div_odd_sub"]
    assert [n for n, t in TASKS.items() if not t.cyclic] == ["s5", "s5_conj", "s5_xyx",
                                                             "sparse_parity"]
    assert [n for n, t in TASKS.items() if t.additive] == ["add", "sub"]
    with pytest.raises(ConfigError, match=r"task\.name: must be one of add, sub, mul, div, s5, "):
        from_flat({"task.name": "pow"})
    with pytest.raises(ValueError, match="unknown task 'pow'"):
        operation_table("pow", 7)


def test_a_new_task_is_one_registry_entry(monkeypatch):
    """Config validation, the vocabulary and the split all read the task's TASKS entry."""
    task = Task(lambda c: operation_table("sub", c.p), n_tokens=lambda c: c.p + 1,
                needs_prime=True)
    monkeypatch.setitem(TASKS, "add", task)
    cfg = from_flat({"task.name": "add", "task.p": 7}).task
    assert cfg.spec is task and cfg.n_tokens == 8
    split = make_split(cfg, 0)
    assert (split.train_x[:, 2] == 8).all()  # the '=' token follows the task's vocabulary
    with pytest.raises(ConfigError, match=r"task\.p must be prime for task\.name=add"):
        from_flat({"task.name": "add", "task.p": 8})


def test_power_et_al_operations_by_hand():
    """Power et al. (2022)'s operations on Z_7, entries computed by hand."""
    odd = _lookup("div_odd_sub", 7)
    assert len(odd) == 7 * 6 and all(b != 0 for _, b in odd)
    # y = 3 odd: 2 / 3 = 2 * 5 = 10 = 3 (3 * 5 = 15 = 1 mod 7); y = 4 even: 2 - 4 = -2 = 5.
    assert odd[(2, 3)] == 3 and odd[(2, 4)] == 5 and odd[(6, 1)] == 6
    assert _lookup("sum_sq", 7)[(2, 3)] == (4 + 9) % 7 == 6
    assert _lookup("quad", 7)[(2, 3)] == (4 + 6 + 9) % 7 == 5
    assert _lookup("quad_x", 7)[(2, 3)] == (4 + 6 + 9 + 2) % 7 == 0
    assert _lookup("cube_xy", 7)[(2, 3)] == (8 + 6) % 7 == 0
    assert _lookup("cube_xy2_y", 7)[(2, 3)] == (8 + 18 + 3) % 7 == 1
    assert _lookup("cube_xy2_y", 7)[(6, 6)] == (216 + 216 + 6) % 7 == 4
    for name in ("sum_sq", "quad", "quad_x", "cube_xy", "cube_xy2_y"):
        assert len(_lookup(name, 7)) == 49 and not TASKS[name].additive and TASKS[name].cyclic


def test_s5_words_by_hand():
    from sweepgrok.config.tasks import s5_inverse

    elems = s5_elements()
    ix = {e: i for i, e in enumerate(elems)}
    x, y = (1, 2, 0, 3, 4), (1, 0, 2, 3, 4)  # a 3-cycle and a swap
    assert s5_inverse(x) == (2, 0, 1, 3, 4) and s5_compose(x, s5_inverse(x)) == elems[0]
    # x y x^-1 (apply x^-1, then y, then x): i -> x[y[x^-1[i]]]: 0 -> 2 -> 2 -> 0,
    # 1 -> 0 -> 1 -> 2, 2 -> 1 -> 0 -> 1: the swap of 0 and 1 carried by x to a swap of 1 and 2.
    conj = _lookup("s5_conj", 0)
    assert conj[(ix[x], ix[y])] == ix[(0, 2, 1, 3, 4)]
    # x y x: i -> x[y[x[i]]]: 0 -> 1 -> 0 -> 1, 1 -> 2 -> 2 -> 0, 2 -> 0 -> 1 -> 2.
    assert _lookup("s5_xyx", 0)[(ix[x], ix[y])] == ix[(1, 0, 2, 3, 4)]
    # Conjugation preserves the cycle type: a swap stays a swap.
    swaps = {e for e in elems if sum(a != b for a, b in zip(e, range(5), strict=True)) == 2}
    assert all(elems[c] in swaps for (a, b), c in conj.items() if elems[b] in swaps)
    assert len(conj) == 120 * 120


PARITY = {"task.name": "sparse_parity", "geometry.enabled": False}
"""Sparse parity's keys beside the tiny sizes of each test (geometry off: a few points)."""


def _parity(**keys):
    return from_flat({**PARITY, **{f"task.{k}": v for k, v in keys.items()}}).task


def test_sparse_parity_table_by_hand():
    """n = 3 bits, k = 2, all 8 inputs: data_seed 0 draws bits 0 and 2 (pinned: a change of
    the seeded choice changes every parity trial), the label is x0 xor x2."""
    cfg = _parity(bits=3, relevant_bits=2, samples=8, train_fraction=0.5)
    assert parity_relevant_bits(cfg) == [0, 2]
    x, y = cfg.spec.table(cfg)
    table = {tuple(r): int(c) for r, c in zip(x.tolist(), y, strict=True)}
    assert table == {
        (0, 0, 0): 0, (0, 0, 1): 1, (0, 1, 0): 0, (0, 1, 1): 1,
        (1, 0, 0): 1, (1, 0, 1): 0, (1, 1, 0): 1, (1, 1, 1): 0,
    }
    assert (cfg.n_tokens, cfg.n_classes, cfg.seq_len, cfg.size) == (2, 2, 3, 8)
    assert parity_relevant_bits(_parity(bits=3, relevant_bits=2, samples=8, data_seed=1,
                                        train_fraction=0.5)) == [1, 2]
    split = make_split(cfg, 0)
    assert split.train_x.shape == (4, 4) and (split.train_x[:, 3] == 2).all()  # '=' is 2
    both = split.train_x[:, :3].tolist() + split.test_x[:, :3].tolist()
    assert sorted(map(tuple, both)) == sorted(table)  # disjoint and complete


@pytest.mark.parametrize("bits", [12, 30])  # an enumeration below 2^20 inputs, draws above
def test_sparse_parity_sample_is_distinct_seeded_and_labelled(bits):
    cfg = _parity(bits=bits, relevant_bits=3, samples=500)
    x, y = cfg.spec.table(cfg)
    assert x.shape == (500, bits) and x.dtype == torch.int64 and set(x.unique().tolist()) <= {0, 1}
    assert len({tuple(r) for r in x.tolist()}) == 500
    assert torch.equal(y, x[:, parity_relevant_bits(cfg)].sum(1) % 2)
    again = cfg.spec.table(cfg)[0]
    other = _parity(bits=bits, relevant_bits=3, samples=500, data_seed=1)
    assert torch.equal(x, again) and not torch.equal(x, other.spec.table(other)[0])


def test_sparse_parity_refuses_what_it_cannot_draw():
    with pytest.raises(ConfigError, match=r"task\.relevant_bits \(5\) must be at most task\.bits"):
        _parity(bits=4, relevant_bits=5, samples=8)
    with pytest.raises(ConfigError, match=r"task\.samples \(9\) must be at most 2\^task\.bits = 8"):
        _parity(bits=3, relevant_bits=2, samples=9)


def test_a_plugin_table_that_breaks_its_own_declaration_is_named():
    task = Task(lambda c: (torch.zeros(4, 2, dtype=torch.int64), torch.zeros(4).long()),
                size=lambda c: 5)
    cfg = _parity(bits=3, relevant_bits=2, samples=8, train_fraction=0.5)
    with pytest.raises(ValueError, match=r"task sparse_parity: its table does not match it: "
                       r"inputs must be \(size, seq_len\) = \(5, 2\)"):
        make_split(type("C", (), {"spec": task, "name": cfg.name, "p": 7})(), 0)
