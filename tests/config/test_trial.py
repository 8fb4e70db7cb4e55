"""Config tree: defaults, overrides with coercion, and bad values naming their key."""

import pytest
from pydantic import ValidationError

from sweepgrok.config.trial import (
    SEED_KEYS,
    Config,
    ConfigError,
    all_keys,
    config_hash,
    describe_keys,
    dump_yaml,
    flatten,
    from_flat,
    load_config,
    parse_overrides,
    run_column,
    seed_count,
    update,
)

DESIGN_KEYS = [
    "task.name",
    "task.p",
    "task.train_fraction",
    "task.data_seed",
    "model.arch",
    "model.n_layers",
    "model.d_model",
    "model.n_heads",
    "model.d_mlp",
    "model.norm",
    "model.attention",
    "model.unembed",
    "model.temperature",
    "optim.lr",
    "optim.weight_decay",
    "optim.betas",
    "optim.batch_size",
    "geomdr.enabled",
    "geomdr.target_dim",
    "geomdr.penalty",
    "geomdr.start_step",
    "geomdr.lambda_max",
    "geomdr.ramp_steps",
    "geomdr.subsample",
    "train.max_steps",
    "train.eval_every",
    "train.seed",
    "train.grok_threshold",
    "train.stop_after_grok",
]


def test_design_contract_keys_exist_and_are_documented():
    keys, docs = set(all_keys()), describe_keys()
    assert set(DESIGN_KEYS) <= keys
    assert all(docs[k] for k in keys), [k for k in keys if not docs[k]]


def test_flat_roundtrip_and_frozen():
    cfg = from_flat({"task.p": 7, "model.norm": "sphere"})
    assert from_flat(flatten(cfg)) == cfg
    with pytest.raises(ValidationError):
        cfg.task.p = 11  # type: ignore[misc]


def test_overrides_are_coerced_from_yaml_scalars():
    flat = parse_overrides(
        ["train.max_steps=500", "optim.betas=[0.9, 0.99]", "geomdr.enabled=true"]
    )
    cfg = update(Config(), flat)
    assert cfg.train.max_steps == 500 and cfg.optim.betas == (0.9, 0.99) and cfg.geomdr.enabled


def test_derived_values_follow_p_not_a_default():
    # The trap: d_vocab = p + 1 evaluated once at class definition.
    assert from_flat({"task.p": 7}).task.n_tokens == 7
    assert from_flat({"task.p": 31}).task.n_classes == 31
    assert from_flat({"task.name": "s5"}).task.n_tokens == 120


def test_sphere_implies_cosine_unembed_unless_set():
    assert from_flat({"model.norm": "sphere"}).model.unembed_resolved == "cosine"
    assert (
        from_flat({"model.norm": "sphere", "model.unembed": "linear"}).model.unembed_resolved
        == "linear"
    )
    assert from_flat({"model.norm": "layernorm"}).model.unembed_resolved == "linear"


@pytest.mark.parametrize(
    ("flat", "needle"),
    [
        ({"task.name": "div", "task.p": 100}, "task.p must be prime"),
        ({"task.train_fraction": 1.0}, "task.train_fraction"),
        ({"task.train_fraction": 0.0}, "task.train_fraction"),
        ({"model.d_model": 130, "model.n_heads": 4}, "divisible by model.n_heads"),
        ({"train.max_steps": -5}, "train.max_steps"),
        ({"model.norm": "batchnorm"}, "none, layernorm, rmsnorm, sphere"),
        ({"task.pp": 3}, "unknown key 'task.pp'"),
        ({"bogus.key": 3}, "unknown key 'bogus.key'"),
        ({"optim.lr": "fast"}, "optim.lr"),
        ({"train.seeds": [1, 1]}, "train.seeds"),
        ({"model.arch": "mlp", "model.norm": "sphere"}, "arch=transformer only"),
        ({"geomdr.layers": [3]}, "geomdr.layers"),
        ({"geomdr.penalty": "fraction"}, "tail, tail_fraction, trace"),
    ],
)
def test_bad_values_name_the_key(flat, needle):
    with pytest.raises(ConfigError, match=None) as err:
        from_flat(flat)
    assert needle in str(err.value)


def test_load_yaml_roundtrip_and_errors(tmp_path):
    cfg = from_flat({"task.p": 11, "model.norm": "rmsnorm", "optim.betas": [0.8, 0.9]})
    path = tmp_path / "t.yaml"
    path.write_text(dump_yaml(cfg))
    assert load_config(path) == cfg
    assert load_config(path, ["task.p=13"]).task.p == 13
    (tmp_path / "bad.yaml").write_text("task: {p: [unclosed")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "unk.yaml").write_text("tsak: {p: 7}\n")
    with pytest.raises(ConfigError, match=r"unk\.yaml.*tsak"):
        load_config(tmp_path / "unk.yaml")
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["task.p"])


def test_packed_seeds_are_the_seeds_trained():
    packed = from_flat({"train.seed": 9, "train.seeds": [5, 6]})
    assert packed.train.seed_list == [5, 6]
    # The members (the run rows, hashed into run ids) are single-seed configs.
    assert packed.member(6) == from_flat({"train.seed": 6})
    assert config_hash(packed.member(5)) == config_hash(from_flat({"train.seed": 5}))
    with pytest.raises(ConfigError, match="distinct"):
        from_flat({"train.seeds": [5, 5]})


def test_the_seed_pair_as_runs_show_it():
    assert SEED_KEYS == ("train.seed", "train.seeds")
    assert run_column("train.seeds") == "train.seed"  # one run row per packed seed
    assert run_column("train.seed") == "train.seed" and run_column("optim.lr") == "optim.lr"
    assert seed_count({"train.seeds": [3, 4, 5], "train.seed": 3}) == 3
    assert seed_count({"train.seed": 3}) == 1 and seed_count({"train.seeds": None}) == 1
