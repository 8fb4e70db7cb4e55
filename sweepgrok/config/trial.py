"""The typed, frozen config tree of one trial, with YAML load and ``--set`` overrides.

Keys are dotted paths into the tree (``task.p``, ``model.norm``, ...): they are the contract
between YAML files, the CLI, Ray Tune's flat dicts and the Parquet ``runs/`` columns.
Every field carries a docstring (``use_attribute_docstrings``) that ``describe_keys`` exposes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sweepgrok.config.plugins import check_model, task_spec, validate_options
from sweepgrok.config.suggest import did_you_mean
from sweepgrok.config.tasks import TASKS, Task, train_size
from sweepgrok.config.thresholds import DEFAULT_GROK_THRESHOLD
from sweepgrok.config.yamlfile import YamlInputError, load_file, parse
from sweepgrok.core.errors import excerpt, quoted

NormName = Literal["none", "layernorm", "rmsnorm", "sphere"]
Attention = Literal["softmax", "uniform"]
Unembed = Literal["auto", "linear", "cosine"]
Device = Literal["auto", "cpu", "cuda"]
CudaGraph = Literal["auto", "on", "off"]
MatmulPrecision = Literal["highest", "high"]
GeomDRPenalty = Literal["tail", "tail_fraction", "trace"]
GeomDRSolver = Literal["eigh", "subspace"]
LossName = Literal["cross_entropy", "stablemax"]
OptimizerName = Literal["adamw", "adam"]
GrokfastKind = Literal["none", "ema", "ma"]


class ConfigError(ValueError):
    """A user mistake in a config, grid or search file; the CLI turns it into exit code 2."""


MAX_P = 2000
"""Largest task.p (a Z_p table has p**2 rows: 4e6 at 2000)."""
MAX_BITS = 4096
"""Most input bits of sparse parity (task.bits): a sequence of that many tokens per example."""
MAX_SAMPLES = 1_000_000
"""Most examples of a sampled table (task.samples): a Z_p table has at most MAX_P**2 = 4e6."""
MAX_SEED = 2**63 - 1
"""Largest seed (train.seed, train.seeds, task.data_seed): seeds are int64 columns of the runs/
Parquet (torch's generators would take up to 2**64 - 1, but the run row could not be written)."""
MAX_STEPS = 100_000_000
"""Largest step count (budget, evaluation period, schedules): 1,000x the papers' 1e5 steps."""
MAX_WIDTH = 16_384
"""Largest layer width or head count: 30x the papers' 512; a wider layer is surely a typo."""
MAX_SEEDS = 1_024
"""Most seeds trained in lockstep: each is a full copy of the model in every step."""
MAX_THREADS = 1_024
"""Most torch threads of one run: more than any machine's cores."""


class _Section(BaseModel):
    # strict: YAML's true is not 1 and "7" is not 7 (ints still pass as floats); finite numbers
    # only: nan passes no range check (nan > 0 is false) and inf passes every lower bound.
    model_config = ConfigDict(
        frozen=True, extra="forbid", strict=True, allow_inf_nan=False, use_attribute_docstrings=True
    )


def is_prime(n: int) -> bool:
    """Trial division; p is at most a few thousand here."""
    if n < 2:
        return False
    return all(n % k for k in range(2, int(n**0.5) + 1))


class TaskConfig(_Section):
    name: str = "add"
    """Operation: add, sub, mul, div (a * b^-1 mod p) on Z_p, or s5 (permutation composition);
    Power et al. (2022)'s div_odd_sub (a / b if b odd, else a - b), sum_sq (a^2 + b^2), quad
    (a^2 + ab + b^2), quad_x (quad + a), cube_xy (a^3 + ab), cube_xy2_y (a^3 + ab^2 + b) on Z_p,
    and s5_conj (a b a^-1), s5_xyx (a b a) on S5; sparse_parity (Barak et al. 2022: the parity
    of task.relevant_bits of task.bits bits); or a task from outside sweepgrok, as
    'module:attribute' or an entry point of group sweepgrok.tasks (docs/extending.md)."""
    p: int = Field(113, ge=2, le=MAX_P)
    """Modulus for the Z_p tasks (ignored by the S5 ones); div and div_odd_sub need a prime."""
    train_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    """Fraction of the full operation table used for training, in (0, 1); round(fraction x
    table size) must leave at least one training and one test example."""
    data_seed: int = Field(0, ge=0, le=MAX_SEED)
    """Seed of the train/test split (separate from the init seed train.seed)."""
    split_follows_seed: bool = False
    """If true, each run draws its split from its train.seed (paper 1), ignoring data_seed."""
    bits: int = Field(40, ge=1, le=MAX_BITS)
    """sparse_parity only: input bits n (each a token, 0 or 1)."""
    relevant_bits: int = Field(3, ge=1, le=MAX_BITS)
    """sparse_parity only: relevant bits k (at most task.bits); the label is their parity. Which
    k of the n bits is drawn from task.data_seed."""
    samples: int = Field(1000, ge=2, le=MAX_SAMPLES)
    """sparse_parity only: distinct inputs drawn (from task.data_seed, after the relevant bits)
    to form the table that task.train_fraction splits; at most 2^task.bits."""
    options: dict[str, Any] = {}
    """A plugin task's own keys (a mapping), checked by the plugin; built-ins take none."""

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        task_spec(name)  # a built-in, or a plugin that imports and follows the protocol
        return name

    @model_validator(mode="after")
    def _check(self) -> TaskConfig:
        spec = self.spec
        who = f"task {self.name}" if self.name in TASKS else f"plugin task {self.name!r}"
        validate_options("task.options", spec, self.options, who)
        if self.name == "sparse_parity":
            self._check_parity()
        if spec.needs_prime and not is_prime(self.p):
            raise ValueError(f"task.p must be prime for task.name={self.name} (got {self.p})")
        size, wanted = self.size, round(self.train_fraction * self.size)
        if not 1 <= wanted <= size - 1:
            raise ValueError(
                f"task.train_fraction: {self.train_fraction} x {size} examples ({self.describe()}) "
                f"rounds to {wanted} training examples: it must leave at least 1 training and 1 "
                f"test example (here: above {0.5 / size:.3g} and below {(size - 0.5) / size:.3g})"
            )
        return self

    def _check_parity(self) -> None:
        if self.relevant_bits > self.bits:
            raise ValueError(f"task.relevant_bits ({self.relevant_bits}) must be at most "
                             f"task.bits ({self.bits})")
        if self.samples > 2 ** min(self.bits, 30):  # 2^30 > MAX_SAMPLES
            raise ValueError(f"task.samples ({self.samples}) must be at most 2^task.bits = "
                             f"{2**self.bits} (distinct inputs of {self.bits} bits)")

    def describe(self) -> str:
        """The task in words, for messages: 'add with task.p=11'."""
        if self.name == "sparse_parity":
            return (f"sparse_parity with task.bits={self.bits}, "
                    f"task.relevant_bits={self.relevant_bits}, task.samples={self.samples}")
        return f"{self.name} with task.p={self.p}" if self.spec.uses_p else self.name

    @property
    def size(self) -> int:
        """Examples in the full operation table."""
        return self.spec.size(self)

    @property
    def n_train(self) -> int:
        """Training examples of the split."""
        return train_size(self.size, self.train_fraction)

    @property
    def spec(self) -> Task:
        """This task: its entry in sweepgrok.config.tasks.TASKS, or the plugin's."""
        return task_spec(self.name)

    @property
    def n_tokens(self) -> int:
        """Number of input token values: p for Z_p, 120 for S5, 2 for sparse parity."""
        return self.spec.n_tokens(self)

    @property
    def seq_len(self) -> int:
        """Input tokens of an example before '=': 2 (a, b), task.bits for sparse parity."""
        return self.spec.seq_len(self)

    @property
    def n_classes(self) -> int:
        """Output classes (an operand value for the binary operations, a bit for parity)."""
        return self.spec.classes(self)


class ModelConfig(_Section):
    arch: str = "transformer"
    """transformer (paper 1 model, input [a, b, =]) or mlp (paper 2: embeddings concatenated), or
    a model from outside sweepgrok, as 'module:attribute' or an entry point of group
    sweepgrok.models (docs/extending.md)."""
    n_layers: int = Field(1, ge=1, le=64)
    """Transformer blocks, or hidden layers of the MLP."""
    d_model: int = Field(128, ge=1, le=MAX_WIDTH)
    """Residual width of the Transformer; per-operand embedding width of the MLP (at most 30x
    the papers' widths: a larger one is surely a typo)."""
    n_heads: int = Field(4, ge=1, le=MAX_WIDTH)
    """Attention heads (d_head = d_model / n_heads); unused by the MLP."""
    d_mlp: int = Field(512, ge=1, le=MAX_WIDTH)
    """Hidden width of the Transformer MLP, and of every MLP hidden layer (bounded as
    d_model)."""
    norm: NormName = "none"
    """Normalization that replaces the stream after embed, attention and MLP: none, layernorm,
    rmsnorm (learnable gain) or sphere (h / ||h||)."""
    attention: Attention = "softmax"
    """softmax attention, or uniform (scores forced to 0: every query averages all positions)."""
    unembed: Unembed = "auto"
    """linear, or cosine (logits = temperature * cos(h, w_c)); auto = cosine iff norm is sphere."""
    temperature: float = Field(10.0, gt=0.0)
    """tau of the cosine unembedding (multiplies the cosine)."""
    norm_eps: float = Field(1e-5, gt=0.0, le=1.0)
    """Epsilon of layernorm and rmsnorm, added to the variance (layernorm) or the mean square
    (rmsnorm) under the square root; unused by the other norms. 1e-5 is torch's LayerNorm
    default and every earlier run's value; paper 1's public notebook uses 1e-8 in its RMSNorm
    (its paper-1 RMSNorm files here set it)."""
    options: dict[str, Any] = {}
    """A plugin model's own keys (a mapping), checked by the plugin; built-ins take none."""

    @field_validator("arch")
    @classmethod
    def _known(cls, arch: str) -> str:
        check_model(arch)  # a built-in, or a plugin that imports and has the signatures
        return arch

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        factory = check_model(self.arch)
        who = f"model {self.arch}" if factory is None else f"plugin model {self.arch!r}"
        validate_options("model.options", factory, self.options, who)
        if self.arch == "transformer" and self.d_model % self.n_heads:
            raise ValueError(
                f"model.d_model ({self.d_model}) must be divisible by model.n_heads "
                f"({self.n_heads})"
            )
        if self.arch == "mlp" and (self.norm != "none" or self.attention != "softmax"):
            raise ValueError(
                "model.norm and model.attention apply to arch=transformer only "
                f"(got arch=mlp with norm={self.norm}, attention={self.attention})"
            )
        return self

    @property
    def d_head(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads

    @property
    def unembed_resolved(self) -> Literal["linear", "cosine"]:
        """The unembedding actually built (auto resolved against the norm)."""
        if self.unembed == "auto":
            return "cosine" if self.norm == "sphere" else "linear"
        return self.unembed


class OptimConfig(_Section):
    optimizer: OptimizerName = "adamw"
    """adamw (both papers: the decay shrinks each weight by lr * weight_decay * w per step,
    outside Adam's moments), or adam (Adam with an L2 term: weight_decay * w is added to the
    gradient after the Grokfast filter and the perpendicular gradient, and goes through Adam's
    moments; the optimizer of Grokfast's reference code). Elementwise either way, so packed
    seeds stay independent."""
    lr: float = Field(1e-3, gt=0.0)
    """Learning rate (constant after warmup; no schedule)."""
    weight_decay: float = Field(1.0, ge=0.0)
    """Weight decay: decoupled under adamw, the L2 coefficient under adam (see optimizer)."""
    betas: tuple[float, float] = Field((0.9, 0.98), strict=False)  # a YAML list is fine
    """Adam's (beta1, beta2)."""
    eps: float = Field(1e-8, gt=0.0)
    """Adam's epsilon."""
    batch_size: int | None = Field(None, ge=1, le=MAX_P**2)
    """Minibatch size; null = full batch (the papers). At most the largest table (p = 2000:
    4e6 pairs); a batch larger than the training set is the full batch."""
    warmup_steps: int = Field(0, ge=0, le=MAX_STEPS)
    """Linear learning-rate warmup steps (0 = none, as in both papers)."""
    decay_all: bool = True
    """Weight-decay every parameter (the papers' AdamW over model.parameters()); false exempts
    biases and norm gains."""
    loss: LossName = "cross_entropy"
    """Loss minimized and reported (metrics' train_loss, test_loss): cross_entropy (softmax), or
    stablemax (Prieto et al. 2025: s(x) = x + 1 for x >= 0, 1 / (1 - x) below, in place of exp).
    Accuracy is the argmax either way."""
    perpendicular_grad: bool = False
    """Perpendicular gradient (Prieto et al. 2025): before the optimizer step, remove from every
    parameter tensor's gradient, per member, its component along that tensor's weights,
    g - (g.w / ||w||^2) w (a tensor whose weights are all 0 keeps g); after the Grokfast filter."""

    @model_validator(mode="after")
    def _check(self) -> OptimConfig:
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"optim.betas must lie in [0, 1) (got {list(self.betas)})")
        return self


class GeomDRConfig(_Section):
    enabled: bool = False
    """Add the GeomDR spectral penalty (paper 2) to the task loss."""
    target_dim: int = Field(32, ge=0, le=MAX_WIDTH)
    """d*: variance outside the top d* covariance directions is penalized. The covariance of N
    rows of a layer of width w has rank at most min(w, N - 1): a d* at or above that leaves an
    empty tail: penalty 0, not an error."""
    penalty: GeomDRPenalty = "tail"
    """What is penalized, from the covariance eigenvalues mu_j of a layer: tail = sum_{j>d*}
    mu_j (the paper); tail_fraction = sum_{j>d*} mu_j / sum_j mu_j, the share of the variance
    outside the top d*, unchanged when the activations are rescaled (dimension without scale);
    trace = sum_j mu_j, the total variance (a scale control: the same mechanism with no
    dimension target; d* is ignored)."""
    solver: GeomDRSolver = "eigh"
    """How a training step finds the top d* covariance directions of tail and tail_fraction:
    eigh (exact: a full eigendecomposition every step); subspace (warm-started subspace
    iteration: one product with the covariance from the last step's top d* basis per step, a
    basis kept per member and layer and saved in checkpoints; exact eigh on the first penalized
    step; the value is never below the exact tail, and the two agree once the basis has
    settled, see docs/speed.md). Evaluations always use the exact eigenvalues."""
    start_step: int = Field(2000, ge=0, le=MAX_STEPS)
    """t_s: lambda is 0 before this step."""
    lambda_max: float = Field(0.1, ge=0.0)
    """Peak weight of the penalty, reached after the cosine ramp."""
    ramp_steps: int = Field(1000, ge=0, le=MAX_STEPS)
    """T_ramp: length of the cosine ramp from 0 to lambda_max (0 = a step)."""
    subsample: float = Field(1.0, gt=0.0, le=1.0)
    """Fraction of the batch on which the covariance is estimated (fresh seeded subset per step)."""
    layers: list[int] | None = None
    """Indices of hidden representations to regularize; null = all (MLP hidden layers, or the
    Transformer residual stream at the readout position after each block)."""


MAX_GROKFAST_LAM = 1_000.0
"""Largest grokfast.lam: 200x the paper's largest (5); a larger amplification is surely a typo."""
MAX_GROKFAST_WINDOW = 1_000
"""Largest grokfast.window: 10x the paper's 100 (the filter keeps `window` gradients per member)."""


class GrokfastConfig(_Section):
    kind: GrokfastKind = "none"
    """Grokfast gradient filter (Lee et al. 2024), applied before the optimizer step, per member:
    none; ema (g + lam * h, h <- alpha h + (1 - alpha) g, h starting at the first gradient); ma
    (g + lam * mean of the last `window` gradients, once `window` gradients were seen)."""
    alpha: float = Field(0.98, ge=0.0, lt=1.0)
    """EMA decay of the ema filter, in [0, 1) (paper: 0.98)."""
    lam: float = Field(2.0, ge=0.0, le=MAX_GROKFAST_LAM)
    """Amplification of the filtered gradient, in [0, 1000] (paper: 2 for ema, 5 for ma)."""
    window: int = Field(100, ge=1, le=MAX_GROKFAST_WINDOW)
    """Gradients averaged by the ma filter, in [1, 1000] (paper: 100); the filter stores this
    many copies of the gradient."""


class GeometryConfig(_Section):
    enabled: bool = True
    """Measure D_eff, rho and Fourier concentration at every evaluation."""
    knn_k: int = Field(10, ge=1)
    """k of the k-nearest-neighbour distance rho; less than the points measured on (geometry.sample
    or the training examples, whichever is fewer)."""
    sample: int = Field(1024, ge=16, le=16_384)
    """Training points (seeded subsample) on which D_eff and rho are measured (at most 16384:
    rho's N x N distance matrix is then 1 GiB per seed)."""
    collapse_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    """Collapse onset: first evaluation where D_eff < this fraction of its running maximum."""
    fourier_top: int = Field(8, ge=1)
    """How many top frequencies the Fourier concentration counts."""


class TrainConfig(_Section):
    max_steps: int = Field(10_000, ge=1, le=MAX_STEPS)
    """Budget in optimizer steps; a run that has not grokked by then is censored (at most 1e8,
    1000x the papers' budgets: a larger one is surely a typo)."""
    eval_every: int = Field(200, ge=1, le=MAX_STEPS)
    """Evaluate (full train and test set) every this many steps."""
    early_evals: bool = True
    """Also evaluate at a few log-spaced steps before the first eval_every."""
    seed: int = Field(0, ge=0, le=MAX_SEED)
    """Init seed (and minibatch / subsample order); separate from task.data_seed. At most
    2**63 - 1: seeds are int64 columns of the runs/ Parquet."""
    seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] | None = Field(
        None, min_length=1, max_length=MAX_SEEDS
    )
    """Several distinct init seeds, each in [0, 2**63 - 1], trained in lockstep as one batched
    model (one run per seed; each is a copy of the model in every step)."""
    fit_threshold: float = Field(0.99, gt=0.0, le=1.0)
    """Train accuracy that defines the fit step."""
    grok_threshold: float = Field(DEFAULT_GROK_THRESHOLD, gt=0.0, le=1.0)
    """Test accuracy that defines grokking for stopping and status (0.95 and 0.99 are always
    both recorded)."""
    stop_after_grok: bool = True
    """End a run at the first evaluation where it has grokked."""
    checkpoint_every: int = Field(10, ge=1, le=MAX_STEPS)
    """Evaluations between checkpoints (when the caller asks for checkpoints)."""
    device: Device = "auto"
    """cpu, cuda, or auto (cuda when available; in a Ray trial, only when the trial asked for
    resources.gpu). cuda on a machine without CUDA: `train` exits with the error before
    training; `validate` only warns (the file may be meant for a GPU machine)."""
    cuda_graph: CudaGraph = "auto"
    """Replay the whole training step (forward, loss, backward, gradient shaping, optimizer step)
    as one captured CUDA graph: auto = on a CUDA device, off on a CPU. A step that cannot be
    captured (minibatches, geomdr.subsample < 1, geomdr.solver eigh, grokfast ma) runs eagerly,
    said once in the log. on = as auto, but a CPU device is an error. Same arithmetic either way:
    on CUDA the optimizer is always the fused, capturable Adam(W)."""
    matmul_precision: MatmulPrecision = "highest"
    """float32 matrix products: highest = full float32; high = TensorFloat-32 on GPUs that have
    it (faster, ~10 mantissa bits per operand; embedding lookups on CUDA are products too, so
    they round the same way). No effect on a CPU."""
    threads: int | None = Field(None, ge=1, le=MAX_THREADS)
    """torch intra-op threads for this run; null = leave torch's default (at most 1024, more
    than any machine's cores)."""
    deterministic: bool = True
    """Use torch's deterministic kernels (the embedding backward otherwise accumulates in a
    thread-dependent order): bit-identical reruns and resumes for any thread count."""

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"train.seeds must be a list of distinct ints: {self.seeds}")
        if self.cuda_graph == "on" and self.device == "cpu":
            raise ValueError("train.cuda_graph: on needs a CUDA device, but train.device is "
                             "cpu: use cuda_graph auto or off, or device cuda or auto")
        return self

    @property
    def seed_list(self) -> list[int]:
        """The init seeds this config trains (train.seeds, else [train.seed])."""
        return list(self.seeds) if self.seeds is not None else [self.seed]


SEED_KEYS = ("train.seed", "train.seeds")
"""The keys that set a trial's init seeds: one (train.seed), or several trained in lockstep
(train.seeds; train.seed is then not used). The runs/ Parquet holds one row per seed, its
seed in train.seed (train.seeds null): see run_column and seed_count."""


def run_column(key: str) -> str:
    """The runs/ column that shows a trial's value of config `key`: train.seeds shows as each
    run's train.seed (a packed trial writes one run row per seed); any other key as itself."""
    return SEED_KEYS[0] if key == SEED_KEYS[1] else key


def seed_count(flat: Mapping[str, Any]) -> int:
    """How many runs a trial's flat config trains: the length of train.seeds, else 1."""
    seeds = flat.get(SEED_KEYS[1])
    return len(seeds) if isinstance(seeds, list) and seeds else 1


class Config(_Section):
    task: TaskConfig = TaskConfig()
    """The algorithmic task and its split."""
    model: ModelConfig = ModelConfig()
    """The network."""
    optim: OptimConfig = OptimConfig()
    """The optimizer and the loss it minimizes."""
    geomdr: GeomDRConfig = GeomDRConfig()
    """The GeomDR spectral regularizer (paper 2)."""
    grokfast: GrokfastConfig = GrokfastConfig()
    """The Grokfast gradient filter (Lee et al. 2024)."""
    geometry: GeometryConfig = GeometryConfig()
    """Representation-geometry measurements."""
    train: TrainConfig = TrainConfig()
    """Budget, evaluation, seeds and stopping."""

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.geomdr.layers is not None:
            n = self.model.n_layers
            bad = [i for i in self.geomdr.layers if not 0 <= i < n]
            if bad:
                raise ValueError(f"geomdr.layers {bad} out of range: allowed 0..{n - 1}")
        if self.geometry.enabled:
            self._check_geometry_points()
        return self

    def _check_geometry_points(self) -> None:
        """rho's k nearest neighbours need more than k points (and D_eff at least 2)."""
        geo, task = self.geometry, self.task
        points = min(geo.sample, task.n_train)
        if geo.knn_k >= points:
            raise ValueError(
                f"geometry.knn_k: must be < {points}, the training points geometry is measured "
                f"on (fewer of geometry.sample {geo.sample} and the {task.n_train} training "
                f"examples of {task.describe()}, task.train_fraction={task.train_fraction}): "
                "lower geometry.knn_k, raise task.p or task.train_fraction, or set "
                "geometry.enabled: false"
            )

    def member(self, seed: int) -> Config:
        """The single-seed config of one member of a batched run."""
        return update(self, {"train.seed": seed, "train.seeds": None})


SECTIONS: dict[str, type[_Section]] = {
    "task": TaskConfig,
    "model": ModelConfig,
    "optim": OptimConfig,
    "geomdr": GeomDRConfig,
    "grokfast": GrokfastConfig,
    "geometry": GeometryConfig,
    "train": TrainConfig,
}


def all_keys() -> list[str]:
    """Every dotted key of the tree, in declaration order."""
    return [f"{s}.{f}" for s, cls in SECTIONS.items() for f in cls.model_fields]


def describe_keys() -> dict[str, str]:
    """Dotted key -> one-line docstring (rendered into docs/config.md by config_docs)."""
    out = {}
    for s, cls in SECTIONS.items():
        for f, info in cls.model_fields.items():
            out[f"{s}.{f}"] = " ".join((info.description or "").split())
    return out


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{"task.p": 7} -> {"task": {"p": 7}}; rejects keys that are not in the tree."""
    tree: dict[str, dict[str, Any]] = {}
    known = set(all_keys())
    for key, value in flat.items():
        if key not in known:
            raise ConfigError(unknown_key_message(key))
        section, _, field = key.partition(".")
        tree.setdefault(section, {})[field] = value
    return tree


def unknown_key_message(key: str) -> str:
    """Name the unknown key, the closest known one, and what is allowed in its place."""
    section, dot, _ = key.partition(".")
    hint = did_you_mean(key, all_keys() if dot else SECTIONS)
    if section in SECTIONS:
        fields = ", ".join(SECTIONS[section].model_fields)
        return f"unknown key '{excerpt(key)}'{hint}: allowed keys in '{section}' are {fields}"
    return f"unknown key '{excerpt(key)}'{hint}: keys start with one of {', '.join(SECTIONS)}"


def flatten(cfg: Config) -> dict[str, Any]:
    """Config -> {dotted key: plain value} (tuples become lists)."""
    out: dict[str, Any] = {}
    for section in SECTIONS:
        for field, value in getattr(cfg, section).model_dump().items():
            out[f"{section}.{field}"] = list(value) if isinstance(value, tuple) else value
    return out


def annotation_at(model: Any, loc: Sequence[Any]) -> Any:
    """The annotation of the field at `loc` inside nested models (None once loc leaves them)."""
    ann = model
    for part in loc:
        fields = getattr(ann, "__pydantic_fields__", None)
        if fields is None or part not in fields:
            return None
        ann = fields[part].annotation
    return ann


def _names(ann: Any) -> str:
    """The values of a Literal (or the keys of a model), comma-separated."""
    fields = getattr(ann, "__pydantic_fields__", None)
    names = fields if fields is not None else [a for a in get_args(ann) if isinstance(a, str)]
    return ", ".join(names)


def loc_text(loc: Sequence[Any]) -> str:
    """("zip", 0, "optim.lr") -> "zip[0].optim.lr" (pydantic's "[key]" markers dropped)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]":
            out += f".{excerpt(str(part))}" if out else excerpt(str(part))
    return out


_PLAIN = {
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}",
    "less_than": "must be < {lt}",
    "too_short": "must have at least {min_length} item(s)",
    "too_long": "must have at most {max_length} item(s)",
    "finite_number": "must be a finite number (not nan or inf)",
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
}
"""pydantic error type -> the short message used instead (ctx filled in)."""

_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")

MAX_MESSAGE_CHARS = 300
"""Most characters of one validator's message that an error line shows."""


def _message(e: Any, model: Any) -> str:
    loc, kind = e["loc"], e["type"]
    if kind in _UNKNOWN:
        parent = loc_text(loc[:-1])
        where = f"keys in '{parent}'" if parent else "top-level keys"
        allowed = _names(annotation_at(model, loc[:-1]))
        hint = did_you_mean(str(loc[-1]), allowed.split(", "), f"{parent}." if parent else "")
        return f"unknown key '{loc_text(loc)}'{hint}: allowed {where} are {allowed}"
    allowed = _names(annotation_at(model, loc))
    if kind == "literal_error" and allowed:
        got_text = e.get("input")
        hint = did_you_mean(got_text, allowed.split(", ")) if isinstance(got_text, str) else ""
        msg = f"must be one of {allowed}"
    elif kind in ("model_type", "dataclass_type", "dict_type") and allowed:
        msg = f"must be a mapping with keys {allowed}"
    elif kind in _PLAIN:
        ctx = {k: f"{v:g}" if isinstance(v, float) else v for k, v in e.get("ctx", {}).items()}
        msg = _PLAIN[kind].format(**ctx)
    else:
        msg = e["msg"].removeprefix("Value error, ").replace("Input should be", "must be")
        # A validator may quote what it got in full (a list of 50,000 seeds): keep one line short.
        msg = excerpt(msg, MAX_MESSAGE_CHARS)
    # A validator's own message says what it got; pydantic's do not.
    shown = "input" in e and not isinstance(e["input"], dict) and kind != "value_error"
    got = f", got {quoted(e['input'])}" if shown else ""
    if kind == "literal_error" and allowed:
        got += hint  # layer_norm: did you mean 'layernorm'?
    if kind in ("int_type", "float_type") and is_number_text(e.get("input")):
        got += NUMBER_TEXT_HINT
    key = loc_text(loc)
    return f"{key}: {msg}{got}" if key else msg


MAX_ERRORS_SHOWN = 5
"""Most errors one message lists (then how many more): a message stays one readable line."""


def format_errors(err: ValidationError, source: str, model: Any = None) -> str:
    """One line naming the source, then each error's key, what it allows and what it got."""
    where = f"{source}: " if source else ""
    errors = err.errors()
    shown = [_message(e, model or Config) for e in errors[:MAX_ERRORS_SHOWN]]
    more = len(errors) - len(shown)
    return where + "; ".join(shown) + (f"; and {more} more error(s)" if more else "")


def from_tree(
    tree: Mapping[str, Any],
    source: str = "",
    blame: Callable[[ValidationError], str] | None = None,
) -> Config:
    """Validate a nested dict into a Config, raising ConfigError with the keys named (after
    `source`, or after what `blame` says gave the values refused)."""
    where = f"{source}: " if source else ""
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{where}a trial config must be a mapping of sections")
    for section in tree:
        if section not in SECTIONS:
            raise ConfigError(where + unknown_key_message(str(section)))
    try:
        return Config.model_validate(dict(tree))
    except ValidationError as err:
        raise ConfigError(format_errors(err, blame(err) if blame else source)) from None


def from_flat(flat: Mapping[str, Any], source: str = "") -> Config:
    """Validate a flat {dotted key: value} dict (Ray Tune's config) into a Config."""
    return from_tree(nest(flat), source)


def merge(tree: Mapping[str, Any], flat: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of a nested dict with flat dotted overrides applied."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in tree.items()}
    for section, fields in nest(flat).items():
        base = out.get(section)
        out[section] = {**(base if isinstance(base, Mapping) else {}), **fields}
    return out


def update(cfg: Config, flat: Mapping[str, Any]) -> Config:
    """A new Config with dotted overrides applied and validated."""
    return from_flat({**flatten(cfg), **flat})


_NUMBER_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
"""A decimal number as text ('0.001' in quotes: YAML keeps it a string)."""

NUMBER_TEXT_HINT = " (a number in quotes is text: write it without the quotes, e.g. 1e-3)"
"""Appended to a type error whose input is a number written as text."""


def is_number_text(value: Any) -> bool:
    """Whether `value` is a string that spells a decimal number ("1e-3", "7")."""
    return isinstance(value, str) and _NUMBER_TEXT.fullmatch(value.strip()) is not None


def _override_value(raw: str) -> Any:
    """A --set value as a file's value is read (YAML 1.2 scalars: 1e-3 is a number, '7' text)."""
    if not raw.strip():
        return None
    try:
        return parse(raw)
    except YamlInputError:
        return raw


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """["train.max_steps=500", "model.norm=sphere"] -> typed flat dict (YAML scalars).

    A key given twice is an error (which one was meant is a guess)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects key=value (got {quoted(item)})")
        if key in out:
            raise ConfigError(
                f"--set: {key} given twice ({key}={quoted(out[key])}, then {quoted(raw)}):"
                " give each key once"
            )
        out[key] = _override_value(raw)
    try:
        nest(out)  # reject unknown keys early, naming them (and that --set gave them)
    except ConfigError as err:
        raise ConfigError(f"--set: {err}") from None
    return out


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file within the limits of sweepgrok.config.yamlfile; any refusal is a
    ConfigError
    naming the file (and never quoting a line of it)."""
    try:
        return load_file(Path(path))
    except YamlInputError as err:
        raise ConfigError(f"{path}: {err}") from None


def read_mapping(path: str | Path, what: str) -> dict[Any, Any]:
    """A YAML file that must be a mapping (`what` names its keys in the message): an empty
    file, a scalar (0, false, '') or a list is refused, not read as all defaults."""
    doc = read_yaml(path)
    if not isinstance(doc, Mapping):
        # What it is, not what it says: a file named by `base:` may hold anything (a secret).
        raise ConfigError(f"{path}: must be a mapping of {what} (got {_kind(doc)})")
    return dict(doc)


def _kind(doc: Any) -> str:
    if doc is None:
        return "an empty document"
    if isinstance(doc, list):
        return "a list"
    return f"a single {type(doc).__name__} value"


def load_config(path: str | Path, overrides: Iterable[str] = ()) -> Config:
    """Load a trial YAML (sections task/model/optim/geomdr/grokfast/geometry/train) plus --set
    overrides; a value refused is blamed on where it came from (the file, or the --set)."""
    tree = read_mapping(path, "sections")
    items = list(overrides)
    given = {item.partition("=")[0].strip(): item for item in items}
    merged = merge(tree, parse_overrides(items))
    return from_tree(merged, str(path), blame=lambda err: _blamed(err, str(path), given))


def as_config(
    config: str | Path | Mapping[str, Any] | Config,
    overrides: Iterable[str] | Mapping[str, Any] = (),
    source: str = "config",
) -> Config:
    """A trial config given as a YAML path, a dict (nested sections, or flat dotted keys as
    ``{"task.p": 13}``) or a Config, with overrides (``--set`` items, or a flat dict of typed
    values); every refusal is a ConfigError naming `source` (a path names itself) and the key."""
    tree: Mapping[str, Any]
    if isinstance(config, str | Path):
        if not isinstance(overrides, Mapping):
            return load_config(config, overrides)  # a refused value blamed on file or --set
        tree, source = read_mapping(config, "sections"), str(config)
    elif isinstance(config, Config):
        tree = config.model_dump()
    elif isinstance(config, Mapping) and any("." in str(key) for key in config):
        try:
            tree = nest(config)
        except ConfigError as err:
            raise ConfigError(f"{source}: {err}") from None
    elif isinstance(config, Mapping):
        tree = config
    else:
        raise ConfigError(f"{source}: a trial config is a YAML path, a dict of sections or a "
                          f"Config (got {type(config).__name__})")
    flat = (_flat_overrides(overrides) if isinstance(overrides, Mapping)
            else parse_overrides(overrides))
    return from_tree(merge(tree, flat), source)


def _flat_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A flat {dotted key: value} dict of overrides, its keys checked (named as --set does)."""
    try:
        nest(overrides)
    except ConfigError as err:
        raise ConfigError(f"--set: {err}") from None
    return dict(overrides)


def _blamed(err: ValidationError, path: str, given: Mapping[str, str]) -> str:
    """Who gave the values refused: ``--set model.norm=layer_norm`` when every refused key came
    from a --set; ``trial.yaml with --set ...`` when a check across a section's keys failed
    in a section a --set changed; else the file."""
    keys = [loc_text(e["loc"]) for e in err.errors()]
    if keys and all(k in given for k in keys):
        return ", ".join(f"--set {excerpt(given[k])}" for k in dict.fromkeys(keys))
    touched = [item for key, item in given.items()
               if any(not k or key.startswith(k + ".") for k in keys)]
    if touched:
        return f"{path} with " + ", ".join(f"--set {excerpt(item)}" for item in touched)
    return path


def device_problem(device: str, cuda_graph: str = "auto") -> str | None:
    """Why train.device (or train.cuda_graph: on) cannot run on this machine, else None.

    Machine-dependent, so not part of validation: ``train`` refuses it before training,
    ``validate`` only warns (a file may be meant for a GPU machine).
    """
    if device != "cuda" and cuda_graph != "on":
        return None
    import torch  # here, not at the top: config stays light for the CLI

    if torch.cuda.is_available():
        return None
    if device == "cuda":
        key, fix = "train.device: cuda", "use cpu or auto (cuda when available)"
    else:
        key, fix = "train.cuda_graph: on", "use cuda_graph auto (on where CUDA is) or off"
    return f"{key}, but torch finds no CUDA device on this machine: {fix}, or run on a GPU machine"


ID_KEYS_0_1 = frozenset(
    f"{section}.{field}"
    for section, fields in {
        "task": "name p train_fraction data_seed split_follows_seed",
        "model": "arch n_layers d_model n_heads d_mlp norm attention unembed temperature",
        "optim": "lr weight_decay betas eps batch_size warmup_steps decay_all loss "
        "perpendicular_grad",
        "geomdr": "enabled target_dim penalty solver start_step lambda_max ramp_steps subsample "
        "layers",
        "grokfast": "kind alpha lam window",
        "geometry": "enabled knn_k sample collapse_fraction fourier_top",
        "train": "max_steps eval_every early_evals seed seeds fit_threshold grok_threshold "
        "stop_after_grok checkpoint_every device threads deterministic",
    }.items()
    for field in fields.split()
)
"""The 53 keys of sweepgrok 0.1.0, whose run ids hashed every key's value: config_hash keeps
hashing these with their values, defaults included, so that every id 0.1.0 gave is unchanged
(tests/data/run_ids_v0.1.0.json). Never add a key here, never remove one."""


def _canonical(value: Any) -> str:
    """A value as canonical JSON: a float in its shortest exact form (1e-3 and 0.001 alike),
    a tuple as a list, None as null (the types the config holds after validation)."""
    return json.dumps(value, sort_keys=True, default=str)


@functools.cache
def _default_flat(cls: type[Config]) -> dict[str, str]:
    return {k: _canonical(v) for k, v in flatten(cls()).items()}


def config_hash(cfg: Config) -> str:
    """Stable 12-hex digest of the config (the run id of `sweepgrok train`), across versions.

    The keys of 0.1.0 (ID_KEYS_0_1) enter with their values, defaults included, as 0.1.0 hashed
    them; a key added since enters only when its value differs from its default. So a new key
    at its default changes no id, while any key set to another value gives another id. A new
    key's default must therefore be the value that trains as the versions before it did."""
    flat = flatten(cfg)
    default = _default_flat(type(cfg))
    picked = {k: v for k, v in flat.items() if k in ID_KEYS_0_1 or _canonical(v) != default[k]}
    return hashlib.sha256(_canonical(picked).encode()).hexdigest()[:12]


def dump_yaml(cfg: Config) -> str:
    """The config as a trial YAML that load_config reads back to the same Config."""
    tree = {s: getattr(cfg, s).model_dump(mode="json") for s in SECTIONS}
    return yaml.safe_dump(tree, sort_keys=False)
