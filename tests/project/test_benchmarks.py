"""The benchmarks' definitions: the FLOP floor against hand-computed counts, and the reference
loop against sweepgrok's model (a speed-up is only a speed-up if both compute the same thing).
Speeds themselves are never asserted here (see benchmarks/)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import set_flags, tiny_config

from benchmarks import bench_seeds, bench_trainer, gpu_summary
from benchmarks.bench_trainer import (
    P1,
    P2,
    GraphReferenceLoop,
    ReferenceLoop,
    RefMLP,
    RefTransformer,
    graph_modes,
    step_flops,
    variant_name,
)
from benchmarks.run import discover, quick_argv
from sweepgrok.config.tasks import make_split
from sweepgrok.config.trial import Config, from_flat
from sweepgrok.train.models import build_model


def _cfg(overrides: dict) -> Config:
    return from_flat({**overrides, "train.device": "cpu"})


SIZES = tiny_config({"task.p": 11},
                    keys=("task.p", "model.d_model", "model.d_mlp", "model.n_heads"))
"""The tiny trial's sizes at p = 11, over a benchmark's own case (nothing else of the tiny
trial: a benchmark's split and schedule are its own)."""


def _n_train(cfg: Config) -> int:
    return make_split(cfg.task, cfg.task.data_seed).train_x.shape[0]


def test_floor_of_the_paper1_model_at_z113():
    # d = 128, d_mlp = 512, C = 113, V = 114 tokens with '=', R = 3 V = 342 table rows.
    # Per example (readout only): W_O 128^2 + MLP 2 * 128 * 512 + unembed 128 * 113 = 161,920.
    # Tables: K and V over R rows (2 * 342 * 128^2), Q over the 114 '=' rows (114 * 128^2),
    # scores 114 x 342 x 128: 11,206,656 + 1,867,776 + 4,990,464 = 18,064,896.
    cfg = _cfg({**P1, "model.norm": "none"})
    n = _n_train(cfg)
    assert n == 3831  # round(0.3 * 113^2 = 3,830.7)
    forward_macs = 3831 * 161_920 + 18_064_896
    assert step_flops(cfg, n) == 6 * forward_macs == 3_830_282_496
    assert step_flops(cfg, n, members=8) == 8 * 3_830_282_496


def test_floor_with_uniform_attention_has_no_per_example_w_o():
    # Per example: MLP 131,072 + unembed 14,464; tables: V and V @ W_O over 342 rows.
    cfg = _cfg({**P1, "model.attention": "uniform"})
    assert step_flops(cfg, 3830) == 6 * (3830 * 145_536 + 2 * 342 * 128 * 128) == 3_411_657_216


def test_floor_of_the_paper2_mlp_at_mod97():
    # 2 hidden layers of 512: the second 512^2 and the readout 512 * 97 per example; the
    # first layer is two (97, 128) @ (128, 512) tables, 97 * 256 * 512 = 12,713,984 MACs.
    cfg = _cfg(P2)
    n = _n_train(cfg)
    assert n == 2823  # round(0.3 * 97^2 = 2,822.7)
    assert step_flops(cfg, n) == 6 * (2823 * 311_808 + 12_713_984) == 5_357_687_808


def test_floor_of_a_two_layer_transformer():
    # First block: all 3 positions through W_O and the MLP (3 * (d^2 + 2 d f)), tables K, V
    # and Q over all R rows plus R x R scores; last block: K, V at 3 positions (6 d^2), Q and
    # W_O at the readout (2 d^2), MLP (2 d f); unembed d C.
    d, f, c, r = 16, 32, 7, 3 * 8
    cfg = _cfg({"task.p": 7, "model.d_model": d, "model.d_mlp": f, "model.n_heads": 2,
                "model.n_layers": 2})
    per_example = 3 * (d * d + 2 * d * f) + 6 * d * d + 2 * d * d + 2 * d * f + d * c
    tables = 2 * r * d * d + r * d * d + r * r * d
    assert step_flops(cfg, 10) == 6 * (10 * per_example + tables)


def _copy_into_reference(ref: RefTransformer, model) -> None:
    """Member 0 of sweepgrok's ensemble into the notebook-style module (nn.Linear stores
    weights as (out, in); sweepgrok as (in, out))."""
    block = model.blocks[0]
    with torch.no_grad():
        ref.embed.weight.copy_(model.w_e[0])
        ref.pos.copy_(model.w_pos[0])
        for lin, w in ((ref.q, block.w_q), (ref.k, block.w_k), (ref.v, block.w_v),
                       (ref.o, block.w_o), (ref.mlp_in, block.w_in), (ref.mlp_out, block.w_out),
                       (ref.unembed, model.unembed.w_u)):
            lin.weight.copy_(w[0].T)
        ref.mlp_in.bias.copy_(block.b_in[0])
        ref.mlp_out.bias.copy_(block.b_out[0])
        for ln, norm in zip(ref.ln, (model.norm_embed, block.norm_attn, block.norm_mlp),
                            strict=True):
            if isinstance(ln, torch.nn.LayerNorm):
                ln.weight.copy_(norm.gain[0])
                ln.bias.copy_(norm.bias[0])


@pytest.mark.parametrize(("norm", "attention"), [
    ("none", "softmax"), ("layernorm", "softmax"), ("sphere", "softmax"), ("layernorm", "uniform"),
])
def test_reference_transformer_computes_sweepgrok_model(norm, attention):
    cfg = _cfg({**SIZES, "model.norm": norm, "model.attention": attention})
    model = build_model(cfg, [3]).double()
    ref = RefTransformer(cfg).double()
    _copy_into_reference(ref, model)
    x = make_split(cfg.task, 0).train_x
    want = model(x.unsqueeze(0))[0]
    got = ref(x)[:, -1]  # the notebook reads the last position of every-position logits
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_reference_mlp_computes_sweepgrok_model():
    cfg = _cfg({"task.p": 11, "model.arch": "mlp", "model.n_layers": 2, "model.d_model": 8,
                "model.d_mlp": 16})
    model = build_model(cfg, [5]).double()
    ref = RefMLP(cfg).double()
    with torch.no_grad():
        ref.embed.weight.copy_(model.w_e[0])
        for lin, w, b in zip(ref.layers, model.weights, model.biases, strict=True):
            lin.weight.copy_(w[0].T)
            lin.bias.copy_(b[0])
        ref.readout.weight.copy_(model.w_u[0].T)
        ref.readout.bias.copy_(model.b_u[0])
    x = make_split(cfg.task, 0).train_x
    torch.testing.assert_close(ref(x)[:, -1], model(x.unsqueeze(0))[0], rtol=1e-10, atol=1e-10)


def test_run_finds_every_benchmark_and_its_quick_arguments():
    names = discover()
    assert names[:3] == ["bench_trainer", "bench_seeds", "bench_ray"]
    assert set(names) == {"bench_trainer", "bench_seeds", "bench_ray", "bench_geomdr",
                          "bench_analysis", "bench_progress", "bench_fourier_losses",
                          "bench_startup"}
    assert quick_argv("bench_seeds") == ["--quick"]
    assert quick_argv("bench_fourier_losses") == ["--quick"]


# ---- the GPU check's code paths, on the CPU at tiny sizes -----------------------------------

def test_graph_modes_follow_the_config_and_the_device(monkeypatch):
    keys = ["train.device", "train.cuda_graph"]
    monkeypatch.setattr(bench_trainer, "all_keys", lambda: keys)
    assert graph_modes("both", "cuda") == ["off", "on"]
    assert graph_modes("both", "cpu") == ["off"]  # on needs CUDA
    assert graph_modes("auto", "cpu") == ["auto"]
    monkeypatch.setattr(bench_trainer, "all_keys", lambda: keys[:1])  # a version without it
    assert graph_modes("both", "cuda") == [None]
    assert variant_name(None) == "sweepgrok" and variant_name("on") == "sweepgrok graph on"


def test_the_cuda_graph_reference_needs_cuda():
    with pytest.raises(ValueError, match="CUDA"):
        GraphReferenceLoop(_cfg(SIZES), torch.device("cpu"))


def test_reference_loop_step_is_one_adamw_step_on_the_full_batch():
    cfg = _cfg(SIZES)
    loop = ReferenceLoop(cfg, torch.device("cpu"))
    w = loop.model.unembed.weight
    w0 = w.detach().clone()
    loss = F.cross_entropy(loop.model(loop.x)[:, -1], loop.y)
    (g,) = torch.autograd.grad(loss, [w])
    loop.step()
    assert loop.losses == [pytest.approx(loss.item(), rel=1e-6)]  # the loss before the update
    # AdamW's first step: decoupled decay, then lr * m_hat / (sqrt(v_hat) + eps) with
    # m_hat = g, v_hat = g^2 (bias-corrected), eps = 1e-8 (torch's default).
    lr, wd = cfg.optim.lr, cfg.optim.weight_decay
    want = w0 * (1 - lr * wd) - lr * g / (g.abs() + 1e-8)
    torch.testing.assert_close(w.detach(), want, rtol=1e-5, atol=1e-7)


def test_bench_trainer_on_cpu_writes_its_timings_and_skips_the_graph(tmp_path, capsys):
    out = tmp_path / "t.json"
    bench_trainer.main(["--cases", "paper-1 Z_113, layernorm", "--threads", "1", "--rounds",
                        "1", "--steps", "1", "--json", str(out), *set_flags(SIZES)])
    assert "cuda graph reference skipped (it needs a CUDA device)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    (row,) = doc["rows"]
    assert doc["device"] == "cpu" and doc["sets"]["task.p"] == 11
    assert "reference" in row["ms"] and "cuda graph" not in row["ms"]
    assert any(k.startswith("sweepgrok") for k in row["ms"])
    assert row["n"] == 36  # round(0.3 * 11^2 = 36.3)
    assert row["flops"] == step_flops(_cfg({**P1, "model.norm": "layernorm", **SIZES}), 36)


def test_bench_trainer_refuses_a_bad_override_naming_the_key(capsys):
    with pytest.raises(SystemExit) as exc:
        bench_trainer.main(["--set", "train.nonsense=1"])
    assert exc.value.code == 2 and "train.nonsense" in capsys.readouterr().err


def test_bench_seeds_members_per_member_step_against_a_given_floor(tmp_path, capsys):
    out = tmp_path / "s.json"
    bench_seeds.main(["--members", "1", "2", "--repeats", "1", "--steps", "1",
                      "--peak-tflops", "0.001", "--json", str(out), *set_flags(SIZES)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["members"] for r in rows] == [1, 2]
    cfg = _cfg({**bench_seeds.MEMBERS_CASE, **SIZES})
    flops = step_flops(cfg, 36)  # one member's step, whatever E
    for r in rows:
        assert r["flops_per_member_step"] == flops
        assert r["floor_ms_per_member_step"] == pytest.approx(flops / 1e9 * 1e3)  # 1 GFLOP/s
    assert "ratio" in capsys.readouterr().out


def test_the_paper1_floor_on_an_h200_is_0057_ms():
    # 3,830,282,496 FLOP (test_floor_of_the_paper1_model_at_z113) at 67 TFLOP/s.
    cfg = _cfg({**bench_seeds.MEMBERS_CASE})
    ms = step_flops(cfg, 3831) / (bench_seeds.CUDA_FP32_TFLOPS * 1e12) * 1e3
    assert ms == pytest.approx(0.05717, abs=1e-5)


def _summary_inputs(tmp_path):
    (tmp_path / "bench_trainer.json").write_text(json.dumps({"rows": [{
        "case": "paper-1 Z_113, layernorm", "device": "cuda",
        "ms": {"sweepgrok graph off": 6.0, "sweepgrok graph on": 1.0, "reference": 4.0,
               "cuda graph": 2.0}}]}))
    (tmp_path / "bench_seeds.json").write_text(json.dumps({"device": "cuda", "rows": [
        {"members": e, "flops_per_member_step": 3.83e9, "floor_ms_per_member_step": 0.05,
         "ms": {"sweepgrok graph on": ms, "sweepgrok graph off": 2 * ms}}
        for e, ms in ((1, 1.0), (256, 25.6))]}))
    (tmp_path / "tests.xml").write_text(
        '<testsuites><testsuite tests="5" failures="1" errors="0" skipped="1" time="12.3">'
        '<testcase classname="tests.test_a" name="test_x"><failure/></testcase>'
        '<testcase classname="tests.test_a" name="test_y"/></testsuite></testsuites>')


def test_gpu_summary_states_the_targets_in_the_issue_words(tmp_path):
    _summary_inputs(tmp_path)
    text = gpu_summary.summary(tmp_path, ["bench_trainer=0:60:75", "bench_seeds=124:110:110",
                                          "ray_grid=1:30:100", "tests=0:100:150"], None, 300)
    assert "E=1: 0.50x the CUDA graph (sweepgrok graph on; graph off: 3.00x)" in text
    assert "E=1: 0.25x the eager notebook loop" in text
    assert "E=256: 0.1000 ms per member-step (2.00x the FP32 floor; sweepgrok graph on;" in text
    assert "E=1: 1.0000 ms per member-step (20.00x the FP32 floor" in text
    assert "failed parts: bench_seeds, ray_grid" in text
    assert "bench_seeds TIMED OUT (cap 110 s)" in text and "ray_grid FAILED (exit 1" in text
    assert "Tests: 3 passed, 1 failed, 0 errors, 1 skipped in 12 s" in text
    assert "not passed: tests.test_a::test_x" in text


def test_gpu_summary_says_what_is_missing_instead_of_failing(tmp_path):
    text = gpu_summary.summary(tmp_path, ["tests=skipped:0:3"], tmp_path / "no_sweep", None)
    assert "failed parts: tests" in text and "tests SKIPPED" in text
    for what in ("bench_trainer", "bench_seeds", "Ray grid", "Tests"):
        assert f"{what}: not available (" in text


@pytest.mark.parametrize("script", ["gpu_check.sh", "device_env.sh", "make_device_carry.sh"])
def test_the_device_scripts_parse(script):
    path = Path(__file__).parents[2] / "benchmarks" / script
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def test_unrunnable_leaves_out_tests_that_need_a_missing_module(tmp_path):
    (tmp_path / "helper.py").write_text("X = 1\n")  # a module of the tests' own folder
    (tmp_path / "test_top.py").write_text("import no_such_module_xyz\n")
    (tmp_path / "test_inner.py").write_text(
        "import pytest\nfrom helper import X\n\n"
        "@pytest.fixture\ndef client():\n    from no_such_module_xyz.sub import C\n    return C\n\n"
        "def _use():\n    return client\n\n"
        "def test_fixture(client):\n    pass\n\n"
        "def test_helper():\n    _use()\n\n"
        "def test_fine():\n    import json\n")
    lines = subprocess.run(
        [sys.executable, "-m", "benchmarks.unrunnable", str(tmp_path)],
        capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2]).stdout.split()
    assert lines == [f"--deselect={tmp_path}/test_inner.py::test_fixture",
                     f"--deselect={tmp_path}/test_inner.py::test_helper",
                     f"--ignore={tmp_path}/test_top.py"]


def test_gpu_summary_counts_the_grid_runs_by_status_and_device(tmp_path):
    import pandas as pd

    (tmp_path / "g" / "runs").mkdir(parents=True)
    pd.DataFrame({"run_id": ["a", "b", "c"], "status": ["grokked", "censored", "censored"],
                  "device": ["cuda", "cuda", "cuda"]}).to_parquet(tmp_path / "g/runs/p.parquet")
    (line,) = gpu_summary.grid_lines(tmp_path / "g")
    assert line == ("Ray grid (g): 3 runs, statuses {'grokked': 1, 'censored': 2}, "
                    "device {'cuda': 3}")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_profile_step_says_it_needs_cuda_on_a_cpu():
    run = subprocess.run([sys.executable, "-m", "benchmarks.profile_step", "--members", "1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "profile_step needs a CUDA device" in run.stderr
