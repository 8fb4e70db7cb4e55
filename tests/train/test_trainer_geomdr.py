"""GeomDR inside the trainer: nothing changes before t_s, D_eff falls after it."""

from conftest import tiny_config

from sweepgrok.config.trial import from_flat
from sweepgrok.store.sink import ListSink
from sweepgrok.train.trainer import train

BASE = tiny_config({
    "task.p": 23, "task.train_fraction": 0.5, "model.arch": "mlp", "model.d_mlp": 64,
    "model.n_layers": 2, "train.max_steps": 250, "train.eval_every": 50,
    "train.stop_after_grok": False, "geometry.sample": 128, "geomdr.target_dim": 3,
    "geomdr.start_step": 100, "geomdr.ramp_steps": 50, "geomdr.lambda_max": 0.1,
    "geomdr.subsample": 0.5,
})


def _run(**kw):
    sink = ListSink()
    train(from_flat({**BASE, **kw}), sink)
    return {m["step"]: m for m in sink.metrics}, {(g["step"], g["layer"]): g for g in sink.geometry}


def test_deff_falls_after_start_step_only_in_the_chosen_layers():
    base, base_geo = _run(**{"geomdr.enabled": False})
    reg, reg_geo = _run(**{"geomdr.enabled": True})
    last, last_geo = _run(**{"geomdr.enabled": True, "geomdr.layers": [1]})
    for step in (0, 50, 100):  # lambda(t) = 0 up to and including t_s
        assert reg[step]["train_loss"] == base[step]["train_loss"] == last[step]["train_loss"]
        assert reg[step]["geomdr_lambda"] == 0.0
    assert reg[150]["geomdr_lambda"] == 0.1  # ramp over: lambda_max
    for step in (200, 250):
        assert reg_geo[step, 1]["deff"] < 0.75 * base_geo[step, 1]["deff"]
        assert reg_geo[step, 0]["deff"] < base_geo[step, 0]["deff"]
        assert last_geo[step, 1]["deff"] < 0.75 * base_geo[step, 1]["deff"]
    assert base[250]["geomdr_loss"] is None and reg[250]["geomdr_loss"] < reg[100]["geomdr_loss"]
    # Regularizing only layer 1 leaves more of layer 0's spectrum than regularizing both.
    assert last_geo[250, 0]["deff"] > reg_geo[250, 0]["deff"]
