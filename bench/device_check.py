"""GPU check of the torch upstream: the same pipelines trained and scored on CUDA and on the CPU.

    python3 bench/device_check.py [--n-train 200000] [--n-eval 200000]

For a machine with a CUDA GPU (run through the workplace's device tool; CI never runs it). Needs torch, numpy,
pandas, pyarrow and pyyaml, not Spark. It checks ``resolve_device`` on a GPU machine (cuda, cuda:0, an index
past the last GPU), then trains the ``lr`` and ``fm`` pipelines on a census-like table with two seeds on each
device, scores the evaluation table with each device's models on both devices, and prints, side by side:
training and scoring seconds per device, the largest logit difference between a model scored on CUDA and on the
CPU (the same weights: round-off only), and each pipeline's mean log loss over its runs per device (different
weights: CUDA's kernels are not bit-identical to the CPU's, so trained models may differ slightly). The log
loss is the project's own (``core.metrics``), checked against scikit-learn's when it is installed. It fails when
the same weights' logits differ by more than :data:`LOGIT_TOLERANCE` between the devices.
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from ctcalc_spark.core._math import sigmoid  # noqa: E402
from ctcalc_spark.core.metrics import log_loss_from_logits  # noqa: E402
from ctcalc_spark.errors import ConfigError  # noqa: E402
from ctcalc_spark.upstream.config import TableColumns, TableSource  # noqa: E402
from ctcalc_spark.upstream.data import write_census_like  # noqa: E402
from ctcalc_spark.upstream.models import ModelSpec  # noqa: E402
from ctcalc_spark.upstream.score import score_table  # noqa: E402
from ctcalc_spark.upstream.table import read_table  # noqa: E402
from ctcalc_spark.upstream.train import resolve_device, train_table_models  # noqa: E402

COLUMNS = TableColumns(
    categorical=("work class", "education", "occupation", "native country", "sex"),
    numeric=("age", "hours-per-week", "capital.gain"),
    label="income", positive_label=">50K", example_id="person id", ds="interview date", null_values=("?",),
)
PIPELINES = {"lr": ModelSpec(arch="lr", batch_size=1024), "fm": ModelSpec(arch="fm", batch_size=1024)}
SEEDS = (0, 1)
LOGIT_TOLERANCE = 1e-5
"""Largest allowed |logit on GPU - logit on CPU| for the same weights: float32 round-off of different kernels
(1.4e-6 and 1.9e-6 in two runs on an H100; an ulp of a float32 logit near 8 is 9.5e-7)."""


def scored_logits(folder: Path) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """{(model, run): (logits, labels)} of a scored evaluation table, rows in a fixed order."""
    frame = pq.read_table(folder).to_pandas()
    frame = frame.sort_values(["model", "run", "example_id"], kind="stable")
    return {(str(m), int(r)): (g["logit"].to_numpy(float), g["label"].to_numpy(float))
            for (m, r), g in frame.groupby(["model", "run"], sort=True)}


def check_devices() -> None:
    assert resolve_device("cuda").type == "cuda" and resolve_device(None).type == "cuda"
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    try:
        resolve_device(f"cuda:{torch.cuda.device_count()}")
    except ConfigError as e:
        print(f"resolve_device past the last GPU: {e}")
    else:
        raise AssertionError("an index past the last GPU was accepted")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-train", type=int, default=200_000)
    ap.add_argument("--n-eval", type=int, default=200_000)
    ap.add_argument("--devices", nargs=2, default=["cuda", "cpu"], help="the two devices compared (a dry run of "
                    "this script without a GPU: --devices cpu cpu)")
    args = ap.parse_args()
    gpu, cpu = args.devices
    device = {"gpu": gpu, "cpu": cpu}
    if gpu.startswith("cuda"):
        if not torch.cuda.is_available():
            print("no CUDA device: nothing to check here (--devices cpu cpu for a dry run)")
            return 2
        print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, Python {platform.python_version()}, "
              f"{platform.machine()}")
        check_devices()
    work = Path(tempfile.mkdtemp(prefix="ctcalc-device-"))
    paths = write_census_like(work / "data", n_train=args.n_train, n_eval=args.n_eval, seed=3, eval_days=2)
    train = read_table(TableSource(str(paths["train"]), format="csv"))
    models, seconds = {}, {}
    for side in ("gpu", "cpu"):
        t = time.perf_counter()
        models[side] = train_table_models(PIPELINES, train, COLUMNS, seeds=SEEDS, models_dir=work / side,
                                          device=device[side], num_threads=None)
        seconds[side] = time.perf_counter() - t
    print(f"training {len(PIPELINES)} pipelines x {len(SEEDS)} seeds on {args.n_train:,} rows: "
          f"{gpu} {seconds['gpu']:.1f} s, {cpu} {seconds['cpu']:.1f} s")
    source = TableSource(str(paths["eval"]), format="csv")
    logits = {}
    for trained_on in ("gpu", "cpu"):
        for scored_on in ("gpu", "cpu"):
            out = work / f"scores-{trained_on}-{scored_on}"
            t = time.perf_counter()
            score_table(models[trained_on], source, out, device=device[scored_on], num_threads=None)
            took = time.perf_counter() - t
            logits[trained_on, scored_on] = scored_logits(out)
            print(f"scoring {args.n_eval:,} rows with the {device[trained_on]}-trained models on "
                  f"{device[scored_on]}: {took:.1f} s")
    worst = 0.0
    for trained_on in ("gpu", "cpu"):
        a, b = logits[trained_on, "gpu"], logits[trained_on, "cpu"]
        assert a.keys() == b.keys()
        for key in a:
            assert np.array_equal(a[key][1], b[key][1])
            worst = max(worst, float(np.max(np.abs(a[key][0] - b[key][0]))))
    print(f"same weights scored on {gpu} and on {cpu}: largest logit difference {worst:.2e}")
    try:
        from sklearn.metrics import log_loss as sk_log_loss
    except ImportError:
        sk_log_loss = None
    for name in PIPELINES:
        line = []
        for trained_on in ("gpu", "cpu"):
            runs = [(z, y) for (m, _), (z, y) in logits[trained_on, "cpu"].items() if m == name]
            losses = [log_loss_from_logits(y, z) for z, y in runs]
            if sk_log_loss is not None:
                for (z, y), ours in zip(runs, losses):
                    ref = sk_log_loss(y, sigmoid(z), labels=[0, 1])
                    assert abs(ref - ours) < 1e-9, (ref, ours)
            runs_text = ", ".join(f"{x:.5f}" for x in losses)
            line.append(f"trained on {device[trained_on]} {np.mean(losses):.5f} (runs {runs_text})")
        print(f"{name}: mean log loss, " + "; ".join(line))
    ok = worst <= LOGIT_TOLERANCE
    print("device check " + ("passed" if ok else
                             f"FAILED: the devices' logits differ by more than {LOGIT_TOLERANCE:g}"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
