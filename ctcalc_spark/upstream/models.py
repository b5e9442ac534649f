"""Torch CTR models (LR, FM, FNN, DeepFM, DCN) that output one raw logit per row.

Every model shares one input layer: categorical ids (one shared embedding
table with per-field offsets; ids outside ``[0, cardinality)`` map to a per-field
out-of-vocabulary row) and numeric fields transformed by
``symlog(x) = sign(x) log1p(|x|)`` then standardised with training-set
statistics held as buffers (so they travel in the ``state_dict``). Every model
ends in one scalar global intercept ``model.bias`` — the term the calibrated
metric corrects.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch
from torch import nn

from ctcalc_spark.errors import ConfigError

ARCHS: tuple[str, ...] = ("lr", "fm", "fnn", "deepfm", "dcn")
_EMBED_INIT_STD = 0.01


def _setting(default: Any, doc: str) -> Any:
    """A ModelSpec field with its meaning (``docs/upstream.md`` lists them: :func:`settings_table`)."""
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class ModelSpec:
    """A training pipeline: architecture, the knobs the paper varies, and optimiser settings (each field's
    meaning is in its metadata; :func:`settings_table` lists them)."""

    arch: str = _setting("deepfm", f"the architecture: {', '.join(ARCHS)}")
    embed_dim: int = _setting(8, "embedding size per field (every architecture but `lr`)")
    hidden: tuple[int, ...] = _setting((64, 32), "hidden layer sizes of the MLP (`fnn`, `deepfm`, `dcn`'s deep part)")
    batch_norm: bool = _setting(False, "batch normalisation after each hidden layer (its shift replaces the bias)")
    dropout: float = _setting(0.0, "dropout after each hidden layer, in [0, 1)")
    l2: float = _setting(0.0, "Adam's coupled weight decay on weights and embeddings (biases, batch-norm "
                              "parameters and the global intercept are not decayed)")
    drop_fields: tuple[str, ...] = _setting((), "input columns the model does not see (e.g. a feature ablation)")
    lr: float = _setting(3e-3, "Adam's learning rate")
    batch_size: int = _setting(512, "training rows per step")
    epochs: int = _setting(1, "passes over the training rows")
    cross_layers: int = _setting(2, "cross layers (`dcn` only)")

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "drop_fields", tuple(str(f) for f in self.drop_fields))
        if self.arch not in ARCHS:
            raise ConfigError(f"Expected arch in {ARCHS}, got {self.arch!r}.")
        if self.embed_dim < 1:
            raise ConfigError(f"Expected embed_dim >= 1, got {self.embed_dim}.")
        if any(h < 1 for h in self.hidden):
            raise ConfigError(f"Expected positive hidden sizes, got {self.hidden}.")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"Expected dropout in [0, 1), got {self.dropout}.")
        if self.l2 < 0.0:
            raise ConfigError(f"Expected l2 >= 0, got {self.l2}.")
        if not self.lr > 0.0:
            raise ConfigError(f"Expected lr > 0, got {self.lr}.")
        if self.batch_size < 1 or self.epochs < 1:
            raise ConfigError(f"Expected batch_size >= 1 and epochs >= 1, got {self.batch_size} and {self.epochs}.")
        if self.cross_layers < 0:
            raise ConfigError(f"Expected cross_layers >= 0, got {self.cross_layers}.")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (lists for tuples), safe for JSON and ``torch.load(weights_only=True)``."""
        d = asdict(self)
        d["hidden"] = list(self.hidden)
        d["drop_fields"] = list(self.drop_fields)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelSpec:
        """Inverse of ``to_dict``; unknown keys are an error."""
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(
                f"Unknown ModelSpec keys {unknown}; expected a subset of {sorted(cls.__dataclass_fields__)}."
            )
        return cls(**dict(d))


def settings_table() -> str:
    """The Markdown table of every ModelSpec field, its meaning and its default (in ``docs/upstream.md``; a test
    keeps the two equal)."""
    import json

    rows = ["| setting | meaning | default |", "|---|---|---|"]
    for f in fields(ModelSpec):
        default = f.default
        shown = json.dumps(list(default) if isinstance(default, tuple) else default)
        rows.append(f"| `{f.name}` | {f.metadata['doc']} | `{shown.strip(chr(34))}` |")
    return "\n".join(rows)


class CtrModel(nn.Module):
    """One module for all five architectures; ``forward(cat, num)`` returns logits of shape ``[B]``."""

    def __init__(self, spec: ModelSpec, field_cardinalities: Mapping[str, int], numeric_fields: Sequence[str]) -> None:
        super().__init__()
        self.spec = spec
        self.config: dict[str, Any] = {
            "field_cardinalities": {k: int(v) for k, v in field_cardinalities.items()},
            "numeric_fields": list(numeric_fields),
        }
        self.cat_fields = [f for f in field_cardinalities if f not in spec.drop_fields]
        self.num_fields = [f for f in numeric_fields if f not in spec.drop_fields]
        cards = [int(field_cardinalities[f]) for f in self.cat_fields]
        n_cat, n_num, d = len(cards), len(self.num_fields), spec.embed_dim
        sizes = [c + 1 for c in cards]  # +1: the field's out-of-vocabulary row
        offsets = [0]
        for s in sizes[:-1]:
            offsets.append(offsets[-1] + s)
        total = sum(sizes)
        self.register_buffer("cards", torch.tensor(cards, dtype=torch.long))
        self.register_buffer("offsets", torch.tensor(offsets, dtype=torch.long))
        self.register_buffer("num_mean", torch.zeros(n_num))
        self.register_buffer("num_std", torch.ones(n_num))
        self.bias = nn.Parameter(torch.zeros(1))

        arch = spec.arch
        self.use_linear = arch in ("lr", "fm", "deepfm")
        self.use_fm = arch in ("fm", "deepfm")
        self.use_mlp = arch in ("fnn", "deepfm")
        self.use_dcn = arch == "dcn"
        if self.use_linear:
            self.linear_emb = nn.Embedding(max(total, 1), 1)
            nn.init.zeros_(self.linear_emb.weight)
            self.linear_num = nn.Linear(n_num, 1, bias=False) if n_num else None
            if self.linear_num is not None:
                nn.init.zeros_(self.linear_num.weight)  # start as the constant predictor
        if arch != "lr":
            self.emb = nn.Embedding(max(total, 1), d)
            nn.init.normal_(self.emb.weight, std=_EMBED_INIT_STD)
        if self.use_fm and n_num:
            self.num_emb = nn.Parameter(torch.randn(n_num, d) * _EMBED_INIT_STD)
        deep_in = n_cat * d + n_num
        if self.use_mlp:
            self.mlp = _mlp(deep_in, spec.hidden, spec.batch_norm, spec.dropout, out_dim=1)
        if self.use_dcn:
            self.cross_w = nn.ParameterList(
                [nn.Parameter(torch.randn(deep_in) / math.sqrt(deep_in)) for _ in range(spec.cross_layers)]
            )
            self.cross_b = nn.ParameterList([nn.Parameter(torch.zeros(deep_in)) for _ in range(spec.cross_layers)])
            self.deep = _mlp(deep_in, spec.hidden, spec.batch_norm, spec.dropout, out_dim=None)
            self.head = nn.Linear(deep_in + (spec.hidden[-1] if spec.hidden else deep_in), 1, bias=False)

    def set_numeric_stats(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Store the standardisation of ``symlog(numeric)`` (training-set mean and std)."""
        self.num_mean.copy_(mean.to(self.num_mean))
        self.num_std.copy_(torch.clamp(std.to(self.num_std), min=1e-6))

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        """Logits ``[B]`` from ids ``cat`` (long ``[B, n_cat]``) and raw numerics ``num`` (float ``[B, n_num]``)."""
        bsz = cat.shape[0]
        oov = (cat < 0) | (cat >= self.cards)
        idx = torch.where(oov, self.cards.expand_as(cat), cat) + self.offsets
        x_num = (torch.sign(num) * torch.log1p(torch.abs(num)) - self.num_mean) / self.num_std
        logit = self.bias.expand(bsz)
        if self.use_linear:
            logit = logit + self.linear_emb(idx).sum(dim=(1, 2))
            if self.linear_num is not None:
                logit = logit + self.linear_num(x_num).squeeze(-1)
        if not (self.use_fm or self.use_mlp or self.use_dcn):
            return logit
        e = self.emb(idx)  # [B, F, d]
        if self.use_fm:
            v = e if x_num.shape[1] == 0 else torch.cat([e, x_num.unsqueeze(-1) * self.num_emb], dim=1)
            s = v.sum(dim=1)
            logit = logit + 0.5 * (s * s - (v * v).sum(dim=1)).sum(dim=1)
        h = torch.cat([e.reshape(bsz, -1), x_num], dim=1)
        if self.use_mlp:
            logit = logit + self.mlp(h).squeeze(-1)
        if self.use_dcn:
            xl = h
            for w, b in zip(self.cross_w, self.cross_b):
                xl = h * (xl @ w).unsqueeze(-1) + b + xl  # DCN cross layer: x0 (x_l . w) + b + x_l
            logit = logit + self.head(torch.cat([xl, self.deep(h)], dim=1)).squeeze(-1)
        return logit


def build_model(
    spec: ModelSpec,
    field_cardinalities: Mapping[str, int] | Sequence[int],
    n_numeric: int | Sequence[str],
) -> CtrModel:
    """Build the model of ``spec`` for fields ``c0..`` (cardinalities) and ``n0..`` (or named numerics).

    Example: ``build_model(ModelSpec(arch='dcn'), [5, 100, 5000], 3)(cat, num)`` gives logits ``[B]``.
    """
    if isinstance(field_cardinalities, Mapping):
        cards = {str(k): int(v) for k, v in field_cardinalities.items()}
    else:
        cards = {f"c{i}": int(v) for i, v in enumerate(field_cardinalities)}
    numeric = [f"n{j}" for j in range(n_numeric)] if isinstance(n_numeric, int) else [str(n) for n in n_numeric]
    bad = {k: v for k, v in cards.items() if v < 1}
    if bad:
        raise ConfigError(f"Expected every field cardinality >= 1, got {bad}.")
    known = set(cards) | set(numeric)
    missing = sorted(set(spec.drop_fields) - known)
    if missing:
        raise ConfigError(
            f"drop_fields {missing} are not input fields; available fields are {sorted(known)}."
        )
    kept = [f for f in list(cards) + numeric if f not in spec.drop_fields]
    if not kept:
        raise ConfigError(f"drop_fields {list(spec.drop_fields)} removes every input field; keep at least one.")
    return CtrModel(spec, cards, numeric)


def _mlp(in_dim: int, hidden: Sequence[int], batch_norm: bool, dropout: float, out_dim: int | None) -> nn.Sequential:
    layers: list[nn.Module] = []
    prev = in_dim
    for h in hidden:
        layers.append(nn.Linear(prev, h, bias=not batch_norm))  # BN's shift replaces the bias
        if batch_norm:
            layers.append(nn.BatchNorm1d(h))
        layers.append(nn.ReLU())
        if dropout > 0.0:
            layers.append(nn.Dropout(dropout))
        prev = h
    if out_dim is not None:
        layers.append(nn.Linear(prev, out_dim, bias=False))  # the global intercept is CtrModel.bias
    return nn.Sequential(*layers)
