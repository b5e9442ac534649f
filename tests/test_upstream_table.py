"""Your own table upstream: declared columns -> encoder -> torch seeds -> compact evaluation table -> evaluate job."""
from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tests._frames import read_delta_table
from deltalake import DeltaTable

torch = pytest.importorskip("torch")

from ctcalc_spark.errors import ConfigError, InputError  # noqa: E402
from ctcalc_spark.upstream.config import (  # noqa: E402
    EncodingConfig,
    TableColumns,
    TableSource,
    load_upstream_config,
)
from ctcalc_spark.upstream.data import generate_census_like, write_census_like  # noqa: E402
from ctcalc_spark.upstream.models import ModelSpec  # noqa: E402
from ctcalc_spark.upstream.score import (  # noqa: E402
    ScoreReport,
    find_models,
    read_spark_table,
    score_spark,
    score_table,
    spark_table_report,
    write_spark_scores,
)
from ctcalc_spark.upstream.table import (  # noqa: E402
    NULL_INDEX,
    UNSEEN_INDEX,
    evaluation_keys,
    fit_encoder,
    read_table,
)
from ctcalc_spark.upstream.train import load_table_model, train_table_models  # noqa: E402

CENSUS = TableColumns(
    categorical=("work class", "education", "occupation", "native country", "sex"),
    numeric=("age", "hours-per-week", "capital.gain"),
    label="income",
    positive_label=">50K",
    example_id="person id",
    ds="interview date",
    passthrough=("sex",),
    null_values=("?",),
)
EVAL_DAYS = ["2026-11-02", "2026-11-03"]


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    paths = write_census_like(tmp_path_factory.mktemp("census"), n_train=4_000, n_eval=3_000, seed=3, eval_days=2,
                              unseen_share=0.02)
    return paths


def _files(partition: Path) -> list[str]:
    return sorted(p.name for p in partition.iterdir() if p.suffix == ".parquet")


# ---------------------------------------------------------------- encoder policies (no torch, no Spark)


def test_a_device_torch_cannot_use_is_a_config_error() -> None:
    """`ctcalc train --device cuda` with the CPU build of torch ended in `internal error ... AssertionError: Torch
    not compiled with CUDA enabled`; a typo in the device name in torch's own RuntimeError."""
    import torch

    from ctcalc_spark.upstream.train import resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    if torch.cuda.is_available():  # a GPU machine: an index past the last GPU
        with pytest.raises(ConfigError, match=r"Device 'cuda:99' asked for, but torch sees \d+ GPU"):
            resolve_device("cuda:99")
    else:
        with pytest.raises(ConfigError, match=r"^Device 'cuda' asked for, but (this torch is a CPU build|torch .* sees "
                                              r"no GPU): use --device cpu"):
            resolve_device("cuda")
    with pytest.raises(ConfigError, match=r"^Unknown torch device 'gpu' .*; use cpu, cuda or cuda:<index>\.$"):
        resolve_device("gpu")
    with pytest.raises(ConfigError, match="ctcalc trains and scores on cpu, cuda or mps"):
        resolve_device("meta")


def test_encoder_vocabulary_null_unseen_and_rare_values() -> None:
    train = pa.table({
        "city": ["b", "a", "b", None, "c", "b", "a", "?"],
        "zip": [7, 7, 3, 3, 3, None, 9, 7],
        "income": [1.0, 2.0, None, 4.0, 5.0, 6.0, 7.0, np.inf],
        "y": [0, 1, 0, 1, 0, 1, 0, 1],
    })
    cols = TableColumns(categorical=("city", "zip"), numeric=("income",), label="y", null_values=("?",))
    enc = fit_encoder(train, cols, EncodingConfig(min_count=2))
    assert enc.vocab["city"] == ("b", "a")  # most frequent first; 'c' seen once is rare; '?' and None are null
    assert enc.vocab["zip"] == ("3", "7")  # ties by value; 9 is rare
    assert enc.cardinalities == {"city": 3, "zip": 3}
    # Scoring: ints given as strings or integral floats find the same index; new values are unseen.
    score = pa.table({"city": ["a", "zzz", None, "?", "c"], "zip": ["7", "3", None, "9", "12"],
                      "income": [None, 1.0, np.nan, -np.inf, 3.0]})
    cat, num, counts = enc.encode(score, ["city", "zip"], ["income"])
    assert cat[:, 0].tolist() == [2, UNSEEN_INDEX, NULL_INDEX, NULL_INDEX, UNSEEN_INDEX]
    assert cat[:, 1].tolist() == [2, 1, NULL_INDEX, UNSEEN_INDEX, UNSEEN_INDEX]
    as_float = enc.encode(pa.table({"zip": pa.array([7.0, 3.0], pa.float64())}), ["zip"], [])[0]
    assert as_float[:, 0].tolist() == [2, 1]
    assert counts["city: unseen"] == 2 and counts["city: null"] == 2 and counts["zip: unseen"] == 2
    assert counts["income: null"] == 2 and counts["income: non-finite"] == 1
    # Missing numerics get the fill whose standardised symlog input is 0: the training mean there.
    stats = enc.numeric["income"]
    finite = np.array([1.0, 2.0, 4.0, 5.0, 6.0, 7.0])
    assert stats["mean"] == pytest.approx(np.log1p(finite).mean())
    for row in (0, 2, 3):
        assert np.log1p(num[row, 0]) == pytest.approx(stats["mean"], abs=1e-6)
    assert num[1, 0] == 1.0 and num[4, 0] == 3.0


def test_labels_ids_and_days_follow_the_stated_policies() -> None:
    table = pa.table({
        "y": ["yes", "no", None, "yes", "no"],
        "id": ["17", "abc", "x", None, "-4"],
        "when": pa.array([dt.datetime(2026, 11, 1, 23, 59), dt.datetime(2026, 11, 2, 0, 1), None,
                          dt.datetime(2026, 11, 2), dt.datetime(2026, 11, 3)], pa.timestamp("us", tz="UTC")),
    })
    cols = TableColumns(categorical=("id",), label="y", positive_label="yes", example_id="id", ds="when")
    keys = evaluation_keys(table, cols)
    assert keys.keep.tolist() == [True, True, False, False, True]  # null label, then null id: dropped
    assert keys.counts["dropped: null label"] == 1 and keys.counts["dropped: null example_id"] == 1
    assert keys.label.to_pylist() == [1, 0, 0]
    ids = keys.example_id.to_pylist()
    assert ids[0] == 17 and ids[2] == -4 and ids[1] >= 0 and ids[1] not in (17, -4)
    assert keys.ds.to_pylist() == ["2026-11-01", "2026-11-02", "2026-11-03"]
    # Without an id column: a hash of the whole row; equal rows share it, column order does not matter.
    doubled = pa.concat_tables([table, table.slice(0, 1)])
    no_id = TableColumns(categorical=("id",), label="y", positive_label="yes", ds="when")
    hashed = evaluation_keys(doubled, no_id).example_id.to_pylist()
    assert len(hashed) == 5 and hashed[-1] == hashed[0] and len(set(hashed)) == 4
    reordered = doubled.select(["when", "id", "y"])
    assert evaluation_keys(reordered, no_id).example_id.to_pylist() == hashed
    with pytest.raises(InputError, match=r"label column 'y' with values 0/1.*\['maybe'\].*positive_label"):
        evaluation_keys(pa.table({"y": ["1", "maybe"]}), TableColumns(label="y"), ds_value="2026-11-01")
    with pytest.raises(InputError, match=r"ds column 'd'.*\['11/02/2026'\]"):
        evaluation_keys(pa.table({"y": [1], "d": ["11/02/2026"]}), TableColumns(label="y", ds="d"))
    # Without a ds column and no day given the rows are undated (a fixed set), and --ds has no days to keep.
    assert evaluation_keys(pa.table({"y": [1, 0]}), TableColumns(label="y")).ds.to_pylist() == [None, None]
    with pytest.raises(ConfigError, match=r"--ds 2026-11-01 keeps the rows of those days, but the models declare "
                                          r"no day column"):
        evaluation_keys(pa.table({"y": [1]}), TableColumns(label="y"), days=["2026-11-01"])
    # --ds keeps the rows of its days (a timestamp's UTC day), counted apart from the rows dropped as bad.
    kept = evaluation_keys(table, cols, days=["2026-11-02", "2026-11-03"])
    assert kept.keep.tolist() == [False, True, False, False, True] and kept.ds.to_pylist() == ["2026-11-02",
                                                                                               "2026-11-03"]
    assert kept.counts["left out: other days"] == 1 and kept.counts["dropped: null label"] == 1


def test_a_json_array_file_is_told_to_be_json_lines(tmp_path: Path) -> None:
    """pandas' to_json(orient='records') writes one array; the local reader (train, score) stopped with pyarrow's
    'Column() changed from object to array in row 0' and nothing on what to write instead."""
    frame = pd.DataFrame({"y": [0, 1], "x": [0.5, 1.5]})
    for name, indent in (("flat.json", None), ("pretty.json", 2)):
        frame.to_json(tmp_path / name, orient="records", indent=indent)
        with pytest.raises(InputError, match=rf"Cannot read .*{name}' as json: .*'.*{name}' is one JSON array "
                                             r".* write it with pandas' to_json\(orient='records', lines=True\)$"):
            read_table(TableSource(path=str(tmp_path / name), format="json"))
    (tmp_path / "lines").mkdir()
    frame.to_json(tmp_path / "lines" / "part.json", orient="records", lines=True)
    assert read_table(TableSource(path=str(tmp_path / "lines"), format="json")).num_rows == 2


def test_tables_are_read_with_the_types_spark_gives_them(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text('7,"",x,2026-11-01\n8,,"y",2026-11-02\n')
    csv = read_table(TableSource(path=str(tmp_path / "t.csv"), format="csv", csv_header=False))
    assert csv.column_names == ["_c0", "_c1", "_c2", "_c3"]
    assert all(pa.types.is_string(t) for t in csv.schema.types)  # no type inference: '007' stays '007'
    assert csv.column("_c1").to_pylist() == ["", None]  # a quoted empty field is '', an unquoted one null
    (tmp_path / "t.json").write_text('{"n": 1, "when": "2026-11-01T10:00:00"}\n{"n": 2, "when": null}\n')
    js = read_table(TableSource(path=str(tmp_path / "t.json"), format="json"))
    assert js.column("when").to_pylist() == ["2026-11-01T10:00:00", None]
    assert pa.types.is_integer(js.schema.field("n").type)


def test_csv_files_with_their_columns_in_another_order_are_read_alike_or_refused(spark: Any, tmp_path: Path) -> None:
    """Locally each CSV file's columns are matched by name; Spark reads them by position, so a file whose columns
    come in another order fails there instead of landing in the wrong columns."""
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a.csv").write_text("id,y\n1,0\n2,1\n")
    (folder / "b.csv").write_text("y,id\n1,3\n")
    local = read_table(TableSource(path=str(folder), format="csv"))
    assert sorted(zip(local.column("id").to_pylist(), local.column("y").to_pylist())) == [
        ("1", "0"), ("2", "1"), ("3", "1")]
    with pytest.raises(Exception) as refused:  # Spark's own error: its words are not asserted, the file it names is
        read_spark_table(spark, TableSource(path=str(folder), format="csv")).collect()
    assert "b.csv" in str(refused.value)
    (folder / "b.csv").write_text("id,y\n3,1\n")
    assert sorted(map(tuple, read_spark_table(spark, TableSource(path=str(folder), format="csv")).collect())) == [
        ("1", "0"), ("2", "1"), ("3", "1")]


def test_a_delta_table_folder_is_not_read_as_plain_files(tmp_path: Path) -> None:
    """pyarrow read a Delta Lake table's folder as Parquet files: every version's rows, those since deleted too."""
    (tmp_path / "t" / "_delta_log").mkdir(parents=True)
    pd.DataFrame({"id": [1, 2], "y": [0, 1]}).to_parquet(tmp_path / "t" / "part-0.parquet")
    pd.DataFrame({"id": [1], "y": [1]}).to_parquet(tmp_path / "t" / "part-1.parquet")  # a replaced version's file
    with pytest.raises(InputError, match=r"^Table '.*t' is a delta table \(it holds _delta_log/\): its folder keeps "
                                         r"the files of earlier versions.*Export the table's current version"):
        read_table(TableSource(path=str(tmp_path / "t"), format="parquet"))
    (tmp_path / "t" / "_delta_log").rmdir()
    assert read_table(TableSource(path=str(tmp_path / "t"), format="parquet")).num_rows == 3


def test_quotes_inside_quoted_csv_fields_read_alike_locally_and_on_spark(spark: Any, tmp_path: Path) -> None:
    """pandas and Excel write a quote inside a quoted field twice ("Blue ""XL"" shoe"); pyarrow reads that, and
    Spark's reader (a backslash before a quote by default) gave '"Blue ""XL"" shoe"' and split at the comma."""
    (tmp_path / "t.csv").write_text('id,title,y\n1,"Blue ""XL"" shoe, wide",0\n2,Red hat,1\n')
    source = TableSource(path=str(tmp_path / "t.csv"), format="csv")
    want = [("1", 'Blue "XL" shoe, wide', "0"), ("2", "Red hat", "1")]
    local = read_table(source)
    assert list(zip(*(local.column(c).to_pylist() for c in ("id", "title", "y")))) == want
    assert sorted(map(tuple, read_spark_table(spark, source).collect())) == want


def test_a_readme_beside_the_table_files_is_left_out_with_a_warning(spark: Any, tmp_path: Path, caplog: Any) -> None:
    """A README.txt in the train folder was read first: its line became the table's only column ("lacks declared
    column(s) ['city', 'age', 'clicked']; present columns: ['training data for job 17']"). A folder that also holds
    files named as the format's reads those alone, locally and on Spark, and says which it left out."""
    folder = tmp_path / "t"
    (folder / "day=1").mkdir(parents=True)
    (folder / "day=1" / "a.csv").write_text("id,y\n1,0\n2,1\n")
    (folder / "day=1" / "b.csv.gz").write_bytes(gzip.compress(b"id,y\n3,1\n"))
    (folder / "README.txt").write_text("training data for job 17\n")
    with caplog.at_level("WARNING", logger="ctcalc_spark.upstream.table"):
        local = read_table(TableSource(path=str(folder), format="csv"))
    assert local.column_names == ["id", "y", "day"] and sorted(local.column("id").to_pylist()) == ["1", "2", "3"]
    assert "read the 2 file(s) named as csv files; left out 1 other(s): ['README.txt']" in caplog.text
    rows = read_spark_table(spark, TableSource(path=str(folder), format="csv")).collect()
    assert sorted(r["id"] for r in rows) == ["1", "2", "3"]
    (folder / "README.txt").unlink()  # nothing named otherwise: the folder whole, as before
    assert read_table(TableSource(path=str(folder), format="csv")).num_rows == 3


def test_config_file_and_declarations_are_validated(tmp_path: Path) -> None:
    cfg = load_upstream_config("conf/train_example.yaml")
    assert cfg.columns.label == "income" and "native country" in cfg.columns.categorical
    assert cfg.seed_list == (0, 1, 2) and cfg.scores.files_per_partition == 1
    assert load_upstream_config(None, {"runs": 4, "columns.numeric": ["a"]}).seed_list == (0, 1, 2, 3)
    with pytest.raises(ConfigError, match="Unknown config key"):
        load_upstream_config(None, {"columns.categorcal": ["a"]})
    with pytest.raises(ConfigError, match="not both"):
        load_upstream_config(None, {"runs": 2, "seeds": [0, 1]})
    with pytest.raises(ConfigError, match="both categorical and numeric"):
        TableColumns(categorical=("a",), numeric=("a",))
    with pytest.raises(ConfigError, match=r"'columns.categorical' got 'a' \(str\): .* Write a list: \[a\]"):
        TableColumns.from_dict({"categorical": "a"})


def test_experiment_command_takes_tables_and_columns_from_a_train_config() -> None:
    from ctcalc_spark.cli.cmd_experiment import experiment_config
    from ctcalc_spark.cli.main import build_parser

    args = build_parser().parse_args(["experiment", "--config", "conf/experiment_default.yaml", "--tables",
                                      "conf/train_example.yaml", "--seeds", "3", "--set",
                                      "pipelines.deepfm_no_c2.drop_fields=[education]"])
    cfg = experiment_config(args)
    train = load_upstream_config("conf/train_example.yaml")
    assert cfg.data.own_tables and cfg.seeds == 3
    assert cfg.data.columns == train.columns and cfg.data.eval_table == train.eval_table
    from ctcalc_spark.paper.experiment import load_experiment_config

    census = load_experiment_config("conf/experiment_own_table.yaml").data
    assert census.own_tables and census.columns.categorical == train.columns.categorical
    # The default pipelines drop the synthetic column c2: caught when the config loads, not after training.
    args = build_parser().parse_args(["experiment", "--tables", "conf/train_example.yaml"])
    with pytest.raises(ConfigError, match=r"'deepfm_no_c2' drops \['c2'\], not a declared feature"):
        experiment_config(args)


def test_a_missing_declared_column_lists_the_present_ones(census: dict[str, Path], tmp_path: Path) -> None:
    table = read_table(TableSource(path=str(census["train"]), format="csv"))
    cols = TableColumns(categorical=("education", "workclass"), label="income", positive_label=">50K")
    missing = r"lacks declared column\(s\) \['workclass'\]; present columns: .*'work class'"
    with pytest.raises(InputError, match=missing):
        train_table_models({"lr": ModelSpec(arch="lr")}, table, cols, seeds=[0])
    models = train_table_models({"lr": ModelSpec(arch="lr")}, table, dataclasses.replace(CENSUS, passthrough=()),
                                seeds=[0])
    with pytest.raises(InputError, match=r"evaluation table lacks declared column\(s\) \['age'\]; present"):
        score_table(models, table.drop_columns(["age"]), tmp_path / "scores")
    with pytest.raises(InputError, match="does not exist"):
        read_table(TableSource(path=str(tmp_path / "nope.csv"), format="csv"))


def test_a_csv_in_another_encoding_is_read_with_csv_encoding(tmp_path: Path) -> None:
    """A CSV from Excel on Windows (cp1252) stopped `ctcalc train` with pyarrow's 'invalid UTF8 data' and no way on;
    csv_encoding (--encoding) reads it, with its letters as written."""
    from ctcalc_spark.cli.main import main

    path = tmp_path / "t.csv"
    path.write_bytes("city,age,clicked\nKöln,30,1\nZürich,41,0\n".encode("cp1252"))
    # pyarrow's words before ours ('invalid UTF8 data') are not asserted
    with pytest.raises(InputError, match=r"The file is not UTF-8: give its encoding, --encoding cp1252 for a CSV from "
                                         r"Excel on Windows \(csv_encoding in the config\)"):
        read_table(TableSource(path=str(path), format="csv"))
    table = read_table(TableSource(path=str(path), format="csv", csv_encoding="cp1252"))
    assert table.column("city").to_pylist() == ["Köln", "Zürich"]
    with pytest.raises(ConfigError, match=r"csv_encoding .*got 'utf-9'"):
        TableSource(path=str(path), format="csv", csv_encoding="utf-9")
    assert upstream_overrides_of(["--train", str(path), "--encoding", "cp1252"])["train_table.csv_encoding"] == "cp1252"
    assert main(["train", "--train", str(path), "--format", "csv", "--encoding", "latin-1", "--categorical", "city",
                 "--label", "clicked", "--models-dir", str(tmp_path / "m"), "--runs", "1", "-q"]) == 0


def upstream_overrides_of(argv: list[str]) -> dict:
    """The config overrides ``ctcalc train`` makes of ``argv``."""
    import argparse

    from ctcalc_spark.cli.common import add_column_arguments, add_table_arguments, upstream_overrides

    parser = argparse.ArgumentParser()
    add_table_arguments(parser, table="train")
    add_column_arguments(parser)
    return upstream_overrides(parser.parse_args(argv), table="train")


def test_a_missing_column_names_the_delimiter_or_the_letter_case(census: dict[str, Path], tmp_path: Path) -> None:
    """A ';'-delimited CSV read with the default ',' is one column, and the error listed it without saying why (the
    evaluate job's reader already said so); a name in another letter case is named too."""
    semicolons = tmp_path / "train.csv"
    pd.read_csv(census["train"]).to_csv(semicolons, sep=";", index=False)
    table = read_table(TableSource(path=str(semicolons), format="csv"))
    assert table.num_columns == 1
    cols = dataclasses.replace(CENSUS, passthrough=())
    with pytest.raises(InputError, match=r"lacks declared column\(s\) .*The one column's name holds ';' between the "
                                         r"names: the file is delimited by ';', not by commas: give --delimiter ';' "
                                         r"\(csv_delimiter in the config\)\."):
        train_table_models({"lr": ModelSpec(arch="lr")}, table, cols, seeds=[0])
    assert read_table(TableSource(path=str(semicolons), format="csv", csv_delimiter=";")).num_columns > 1
    excel = tmp_path / "excel.csv"  # Excel's 'sep=;' first line: the header, then a parse failure with ';'
    excel.write_text("sep=;\n" + semicolons.read_text())
    fix = (r"The files' first line is 'sep=;', the line Excel writes \(and reads\) to name a CSV's delimiter, not "
           r"the header: .* Remove that line from the files \(e.g. sed -i 1d FILE, or export them without it\)")
    with pytest.raises(InputError, match=r"present columns: \['sep=;'\]\. " + fix + r", and give the delimiter: "
                                         r"--delimiter ';' \(csv_delimiter in the config\)\."):
        train_table_models({"lr": ModelSpec(arch="lr")}, read_table(TableSource(path=str(excel), format="csv")), cols,
                           seeds=[0])
    # pyarrow's words for the parse failure, between ours, are not asserted
    with pytest.raises(InputError, match=r"Cannot read .* as csv: .*excel.csv.*" + fix + r"\.$"):
        read_table(TableSource(path=str(tmp_path), format="csv", csv_delimiter=";"), columns=["Sex"])
    table = read_table(TableSource(path=str(census["train"]), format="csv"))
    with pytest.raises(InputError, match=r"\['Sex'\]; present columns: .* letter case and spaces included, and 'Sex' "
                                         r"is 'sex' in the table"):
        train_table_models({"lr": ModelSpec(arch="lr")}, table, dataclasses.replace(cols, categorical=("Sex",)),
                           seeds=[0])


# ---------------------------------------------------------------- train + score + evaluate, end to end


@pytest.fixture(scope="module")
def trained(census: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ctcalc train`` through the CLI: two pipelines x two seeds, columns from flags only."""
    from ctcalc_spark.cli.main import main

    models_dir = tmp_path_factory.mktemp("models")
    c = CENSUS
    rc = main(["train", "--train", str(census["train"]), "--format", "csv", "--categorical", *c.categorical,
               "--numeric", *c.numeric, "--label", c.label, "--positive-label", ">50K", "--example-id", "person id",
               "--ds-column", "interview date", "--passthrough", "sex", "--null-values", "?",
               "--seeds", "0", "1", "--set", "pipelines={fm: {arch: fm, batch_size: 256}, lr: {arch: lr, "
               "batch_size: 256}}", "--models-dir", str(models_dir)])
    assert rc == 0
    return models_dir


def test_model_file_carries_what_scoring_needs(trained: Path) -> None:
    assert sorted(find_models(trained)) == [("fm", 0), ("fm", 1), ("lr", 0), ("lr", 1)]
    payload = torch.load(trained / "fm" / "run1.pt", weights_only=True)
    enc = payload["encoder"]
    assert enc["columns"]["categorical"] == list(CENSUS.categorical)
    assert enc["columns"]["positive_label"] == ">50K" and enc["columns"]["example_id"] == "person id"
    assert "Private" in enc["vocab"]["work class"] and "?" not in enc["vocab"]["work class"]
    assert set(enc["numeric"]) == set(CENSUS.numeric) and enc["numeric"]["age"]["std"] > 1e-3  # floored at 1e-6 only when constant
    assert payload["meta"]["seed"] == 1 and payload["meta"]["model_name"] == "fm"
    assert payload["meta"]["counts"]["work class: null"] > 0  # '?' counted as null
    # The model's standardisation buffers are the encoder's statistics.
    loaded = load_table_model(trained / "fm" / "run1.pt", device="cpu")
    mean, std = loaded.encoder.numeric_stats(loaded.model.num_fields)
    np.testing.assert_allclose(loaded.model.num_mean.numpy(), mean, rtol=1e-6)
    np.testing.assert_allclose(loaded.model.num_std.numpy(), std, rtol=1e-6)


@pytest.fixture(scope="module")
def scored(trained: Path, census: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ctcalc score`` through the CLI (local engine)."""
    from ctcalc_spark.cli.main import main

    out = tmp_path_factory.mktemp("eval") / "scores"
    rc = main(["score", "--eval", str(census["eval"]), "--format", "csv", "--models-dir", str(trained),
               "--out", str(out)])
    assert rc == 0
    return out


def test_scored_table_is_compact_and_complete(scored: Path, census: dict[str, Path]) -> None:
    assert sorted(p.name for p in scored.iterdir()) == ["_delta_log", *[f"ds={d}" for d in EVAL_DAYS]]
    for day in EVAL_DAYS:
        assert [re.sub("-[0-9a-f]{12}-", "-T-", n) for n in _files(scored / f"ds={day}")] == ["part-T-00000.parquet"]
    got = read_delta_table(scored)
    assert DeltaTable(str(scored)).version() == 1  # the table made, then every day in one commit
    source = pd.read_csv(census["eval"])
    assert len(got) == 4 * len(source)
    assert list(got.columns[:6]) == ["model", "run", "example_id", "label", "logit", "sex"]
    one = got[(got["model"] == "fm") & (got["run"] == 0)]
    assert one["example_id"].is_unique and np.isfinite(got["logit"]).all()
    assert one["label"].sum() == (source["income"] == ">50K").sum()


def test_unseen_category_scores_as_the_out_of_vocabulary_row(trained: Path, tmp_path: Path) -> None:
    rows = generate_census_like(4, seed=9, n_days=1, start_ds="2026-11-05")
    a, b = rows.copy(), rows.copy()
    a["native country"], b["native country"] = "Atlantis", "Lemuria"  # never seen in training
    c = rows.copy()
    c["native country"] = "country-00"
    reports = [score_table({("fm", 0): trained / "fm" / "run0.pt"}, f, tmp_path / name)
               for name, f in (("a", a), ("b", b), ("c", c))]
    z = [pd.read_parquet(tmp_path / name).sort_values("example_id")["logit"].to_numpy() for name in "abc"]
    np.testing.assert_array_equal(z[0], z[1])
    assert np.abs(z[0] - z[2]).max() > 0
    assert reports[0].counts["native country: unseen"] == 4 and reports[2].counts.get("native country: unseen", 0) == 0


def test_rerun_replaces_only_its_partitions(trained: Path, census: dict[str, Path], tmp_path: Path) -> None:
    models = find_models(trained, ["lr"])
    source = TableSource(path=str(census["eval"]), format="csv")
    out = tmp_path / "scores"
    score_table(models, source, out)
    [first] = _files(out / f"ds={EVAL_DAYS[0]}")
    kept = (out / f"ds={EVAL_DAYS[0]}" / first).stat().st_ino
    [replaced] = _files(out / f"ds={EVAL_DAYS[1]}")
    second_day = pd.read_csv(census["eval"]).query(f"`interview date` == '{EVAL_DAYS[1]}'")
    report = score_table(models, second_day, out, files_per_partition=3)
    assert report.days == [EVAL_DAYS[1]] and report.files_per_day == {EVAL_DAYS[1]: 3}
    assert (out / f"ds={EVAL_DAYS[0]}" / first).stat().st_ino == kept  # untouched
    table = DeltaTable(str(out))
    current = sorted(Path(u).name for u in table.file_uris() if f"ds={EVAL_DAYS[1]}" in u)
    assert len(current) == 3 and replaced not in current  # the old file stays in the folder until a vacuum
    got = table.to_pandas()
    assert (got["ds"] == EVAL_DAYS[1]).sum() == 2 * len(second_day)
    assert (got["ds"] == EVAL_DAYS[0]).sum() == 2 * (len(pd.read_csv(census["eval"])) - len(second_day))
    assert sorted(p.name for p in out.iterdir()) == ["_delta_log", *[f"ds={d}" for d in EVAL_DAYS]]
    with pytest.raises(InputError, match="exists"):
        score_table(models, second_day, out, mode="error")


def test_a_reader_never_sees_a_day_missing_or_doubled_during_a_rescore(trained: Path, census: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    """Re-scores of one day, each one Delta commit, while a reader polls the table: every version it reads has
    each day's rows once (the old rename swap left a moment without the day)."""
    import threading

    models = find_models(trained, ["lr"])
    source = pd.read_csv(census["eval"])
    out = tmp_path / "scores"
    score_table(models, source, out)
    want = {d: 2 * int((source["interview date"] == d).sum()) for d in EVAL_DAYS}
    second_day = source[source["interview date"] == EVAL_DAYS[1]]
    done, errors = threading.Event(), []

    def rescore() -> None:
        try:
            for files in (1, 2, 3, 1, 2, 3):
                score_table(models, second_day, out, files_per_partition=files)
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            done.set()

    writer = threading.Thread(target=rescore)
    writer.start()
    seen = []
    while not done.is_set() or not seen:
        days = read_delta_table(out, ["ds"])["ds"].tolist()
        seen.append({d: days.count(d) for d in set(days)})
    writer.join()
    assert not errors
    assert DeltaTable(str(out)).version() == 7  # the table, the first scoring, six re-scores
    assert all(counts == want for counts in seen), [c for c in seen if c != want][:3]


def test_the_dags_score_step_replaces_its_day_of_the_scored_table(trained: Path, census: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    """The daily DAG's `score` task: the day's feature rows, scored with the registered runs, replace that day of
    the Delta table `ctcalc score` writes, one commit per call (no staging folder, no rename); the other day keeps
    its files. Every row is scored as the run's day, whatever its own day column says."""
    from ctcalc_spark.orchestration.tasks import score_partition

    source = pd.read_csv(census["eval"])
    table = tmp_path / "eval"
    score_table(find_models(trained, ["lr"]), source, table)
    kept = sorted(u for u in DeltaTable(str(table)).file_uris() if f"ds={EVAL_DAYS[0]}" in u)
    rows = source[source["interview date"] == EVAL_DAYS[0]]  # the features folder of a day, its rows dated otherwise
    features = tmp_path / "features.parquet"
    rows.to_parquet(features, index=False)
    models = {"lr": [str(trained / "lr" / f"run{r}.pt") for r in (0, 1)]}
    for _ in range(2):  # the second call replaces the first
        assert score_partition(models, str(features), str(table), EVAL_DAYS[1]) == str(table)
    t = DeltaTable(str(table))
    assert t.version() == 3 and sorted(u for u in t.file_uris() if f"ds={EVAL_DAYS[0]}" in u) == kept
    got = read_delta_table(table, ["ds", "model", "run", "example_id"])
    assert got.groupby("ds").size().to_dict() == {d: 2 * len(rows) for d in EVAL_DAYS}
    day, rows_of_day0 = got[got["ds"] == EVAL_DAYS[1]], got[got["ds"] == EVAL_DAYS[0]]  # the same rows scored
    assert sorted(day["example_id"]) == sorted(rows_of_day0["example_id"]) and set(day["model"]) == {"lr"}
    assert sorted(p.name for p in table.iterdir()) == ["_delta_log", *[f"ds={d}" for d in EVAL_DAYS]]


def test_evaluate_job_reads_the_scored_table(spark: Any, scored: Path, tmp_path: Path) -> None:
    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.jobs.evaluate import evaluate

    cfg = config_from_dict({"task": "binary", "input": {"path": str(scored)}, "output": {"path": str(tmp_path)},
                            "columns": {"slices": ["sex"]}, "split": {"bias_fraction": 0.2, "salt": "t"}})
    m = evaluate(spark, cfg, EVAL_DAYS[0]).metrics
    overall = m[m["slice_name"] == "__all__"]
    assert sorted(zip(overall["model"], overall["run"].astype(int))) == [("fm", 0), ("fm", 1), ("lr", 0), ("lr", 1)]
    assert set(m.loc[m["slice_name"] == "sex", "slice_value"]) == {"F", "M"}
    assert (m["status"] == "ok").all()
    assert (overall["n_rows"] == 1_500).all()  # 3,000 eval rows over two days, every row kept
    for col in ("log_loss", "calibrated_log_loss"):
        values = m[col].astype(float)
        assert np.isfinite(values).all() and values.between(0.2, 0.8).all()


# ---------------------------------------------------------------- Spark scorer == local scorer


def test_spark_scorer_matches_the_local_one(spark: Any, census: dict[str, Path], tmp_path: Path) -> None:
    # No example_id column declared: both engines hash the whole row, and must agree on it.
    cols = TableColumns(categorical=CENSUS.categorical, numeric=CENSUS.numeric, label="income",
                        positive_label=">50K", ds="interview date", passthrough=("sex",), null_values=("?",))
    table = read_table(TableSource(path=str(census["train"]), format="csv"))
    train_table_models({"fnn": ModelSpec(arch="fnn", hidden=(16,), batch_size=512)}, table, cols, seeds=[0, 1],
                       models_dir=tmp_path / "models")
    models = find_models(tmp_path / "models")
    source = TableSource(path=str(census["eval"]), format="csv")
    local = score_table(models, source, tmp_path / "local")
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "700")  # several Arrow batches per task
    try:
        scored = score_spark(spark, read_spark_table(spark, source), models, files_per_partition=2)
        write_spark_scores(scored, str(tmp_path / "spark"))
    finally:
        spark.conf.unset(key) if before is None else spark.conf.set(key, before)
    report = spark_table_report(spark, str(tmp_path / "spark"), list(models))
    assert report.rows_per_day == local.rows_per_day
    assert all(1 <= n <= 2 for n in report.files_per_day.values()), report.files_per_day
    a, b = (read_delta_table(tmp_path / name) for name in ("local", "spark"))
    both = a.merge(b, on=["model", "run", "example_id"], suffixes=("_local", "_spark"), validate="one_to_one")
    assert len(both) == len(a) == len(b)
    for c in ("label", "sex"):
        assert (both[f"{c}_local"] == both[f"{c}_spark"]).all()
    assert (both["ds_local"].astype(str) == both["ds_spark"].astype(str)).all()
    np.testing.assert_allclose(both["logit_local"], both["logit_spark"], rtol=0, atol=1e-6)


# ---------------------------------------------------------------- the experiment runner on your tables


def test_experiment_on_a_user_table(spark: Any, census: dict[str, Path], tmp_path: Path) -> None:
    from ctcalc_spark.paper.experiment import experiment_config_from_dict, run_experiment

    cfg = experiment_config_from_dict({
        "output": str(tmp_path / "exp"),
        "seeds": 2,
        "data": {"train_table": {"path": str(census["train"]), "format": "csv"},
                 "eval_table": {"path": str(census["eval"]), "format": "csv"},
                 "columns": CENSUS.to_dict()},
        "pipelines": {"fm": {"arch": "fm", "batch_size": 512}, "lr": {"arch": "lr", "batch_size": 512}},
        "pairs": [["fm", "lr"]],
        "bootstrap": 100,
        "save_models": False,
    })
    res = run_experiment(cfg, spark=spark, log=lambda _: None)
    assert res.days == EVAL_DAYS
    assert len(res.per_run) == 4 and (res.per_run["status"] == "ok").all()
    (c,) = res.comparisons
    assert c.m_a == c.m_b == 2 and np.isfinite(c.calibrated.acc) and np.isfinite(c.vanilla.acc)
    assert not (tmp_path / "exp" / "data").exists()  # no generated data on this path
    with pytest.raises(ConfigError, match="eval_table.path"):
        experiment_config_from_dict({"data": {"train_table": {"path": "x.csv"}}, "pipelines": {"a": {}, "b": {}},
                                     "pairs": [["a", "b"]]})


def test_score_prints_the_evaluate_command_that_runs_without_a_config(
        spark: Any, trained: Path, census: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After ``ctcalc score`` a user had to write a config file before ``ctcalc evaluate`` would start (--config was
    required). score now prints the command, and evaluate and compare take their keys from --set alone."""
    import shlex

    from ctcalc_spark.cli.main import main
    from ctcalc_spark.config import OutputConfig
    from ctcalc_spark.tables import OutputStore

    monkeypatch.chdir(tmp_path)
    assert main(["score", "--eval", str(census["eval"]), "--format", "csv", "--models-dir", str(trained),
                 "--out", "scores", "--pipeline", "fm", "lr"]) == 0
    lines = capsys.readouterr().out.splitlines()
    step = next(line for line in lines if line.startswith("next: "))
    assert step == f"next: ctcalc evaluate --set input.path=scores --set output.path=eval --ds {EVAL_DAYS[0]}.." \
                   f"{EVAL_DAYS[-1]}"
    assert lines[lines.index(step) + 1] == "  (add --set 'columns.slices=[sex]' for a metrics row per value of the " \
                                           "passthrough columns)"
    args = shlex.split(step.removeprefix("next: "))[1:] + ["--set", "columns.slices=[sex]"]
    assert main(args) == 0
    m = OutputStore(OutputConfig(path=str(tmp_path / "eval"))).read("metrics")
    assert sorted(m["ds"].astype(str).unique()) == EVAL_DAYS
    assert set(m["slice_name"]) == {"__all__", "sex"} and len(m[m["slice_name"] == "__all__"]) == 4 * len(EVAL_DAYS)
    capsys.readouterr()
    assert main(["compare", "--a", "fm", "--b", "lr", "--ds", EVAL_DAYS[0], "--set", "output.path=eval"]) == 0
    assert "fm vs lr" in capsys.readouterr().out


def test_next_step_names_the_days_written() -> None:
    r = ScoreReport("out/scores", [("a", 0)], rows_per_day={"2026-01-01": 5, "2026-01-03": 5})
    assert r.next_step() == ("next: ctcalc evaluate --set input.path=out/scores --set output.path=out/eval "
                             "--ds 2026-01-01,2026-01-03")  # not a range: 01-02 was not written
    assert ScoreReport("my scores", [], rows_per_day={"2026-01-01": 1}).next_step() == \
        "next: ctcalc evaluate --set 'input.path=my scores' --set output.path=eval --ds 2026-01-01"
    assert ScoreReport("s", []).next_step() is None
    uri = ScoreReport("s3a://bucket/team/scores", [], rows_per_day={"2026-01-01": 1}).next_step()
    assert uri == "next: ctcalc evaluate --set input.path=s3a://bucket/team/scores --set " \
                  "output.path=s3a://bucket/team/eval --ds 2026-01-01"  # PurePath made it s3a:/bucket/team/eval


# ---------------------------------------------------------------- days, checks, fixed sets, settings


@pytest.fixture(scope="module")
def dated_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One census-like table over four days (train on some, score others), written once."""
    path = tmp_path_factory.mktemp("dated") / "all.csv"
    generate_census_like(2_000, seed=21, n_days=4, start_ds="2026-03-01").to_csv(path, index=False)
    return path


def _census_flags(table: Path) -> list[str]:
    c = CENSUS
    return ["--format", "csv", "--categorical", *c.categorical, "--numeric", *c.numeric, "--label", c.label,
            "--positive-label", ">50K", "--example-id", "person id", "--ds-column", "interview date",
            "--null-values", "?"]


def test_train_and_score_take_the_days_evaluate_takes(dated_table: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A user split one dated table in pandas to train on its first days: --ds does it, for train and score."""
    from ctcalc_spark.cli.main import EXIT_CONFIG, EXIT_INPUT, main

    rows = pd.read_csv(dated_table)
    per_day = rows["interview date"].value_counts()
    models = tmp_path / "models"
    assert main(["train", "--train", str(dated_table), *_census_flags(dated_table), "--arch", "lr",
                 "--ds", "2026-03-01..2026-03-02", "--models-dir", str(models)]) == 0
    assert "(--ds 2026-03-01..2026-03-02 of them)" in capsys.readouterr().out
    meta = load_table_model(models / "lr" / "run0.pt").meta
    assert meta["n_train_rows"] == per_day["2026-03-01"] + per_day["2026-03-02"]
    assert meta["train_days"] == "2026-03-01..2026-03-02"
    assert meta["counts"]["left out: other days"] == per_day["2026-03-03"] + per_day["2026-03-04"]

    out = tmp_path / "scores"
    assert main(["score", "--eval", str(dated_table), "--format", "csv", "--models-dir", str(models),
                 "--out", str(out), "--ds", "2026-03-04,2026-03-03"]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["_delta_log", "ds=2026-03-03", "ds=2026-03-04"]
    assert len(read_delta_table(out)) == per_day["2026-03-03"] + per_day["2026-03-04"]
    assert f"input rows of other days left out (--ds): {per_day['2026-03-01'] + per_day['2026-03-02']:,}" in printed
    assert "--ds 2026-03-03..2026-03-04" in printed  # the evaluate command names the days written

    assert main(["score", "--eval", str(dated_table), "--format", "csv", "--models-dir", str(models),
                 "--out", str(out), "--ds", "2026-04-01..2026-04-30"]) == EXIT_INPUT
    assert ("The evaluation table has no rows on --ds 2026-04-01..2026-04-30: its column 'interview date' holds "
            "days 2026-03-01..2026-03-04") in capsys.readouterr().err
    assert main(["train", "--train", str(dated_table), "--format", "csv", "--categorical", "sex", "--label", "income",
                 "--positive-label", ">50K", "--ds", "2026-03-01", "--models-dir", str(tmp_path / "m2")]) == EXIT_CONFIG
    assert "no day column is declared: declare it with --ds-column" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # a malformed --ds is a usage error, before anything starts
        main(["train", "--train", str(dated_table), *_census_flags(dated_table), "--ds", "2026-03-05..2026-03-01",
              "--models-dir", str(tmp_path / "m3")])
    assert stopped.value.code == 2
    assert "ends before it starts" in capsys.readouterr().err


def test_constant_features_are_named_at_train_time_and_extreme_scores_at_score_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three features constant over the training days passed `train` silently and `score` wrote logits down to
    -245,714 (only `evaluate` warned). Both commands now say so."""
    from ctcalc_spark.cli.main import main

    rng = np.random.default_rng(4)
    n = 3_000
    frame = pd.DataFrame({"day": np.where(np.arange(n) < 2_000, "2026-05-01", "2026-05-02"),
                          "id": np.arange(n), "x": rng.normal(size=n), "city": rng.choice(["a", "b", "c"], n),
                          "y": (rng.random(n) < 0.3).astype(int)})
    frame["flat"] = np.where(frame["day"] == "2026-05-01", 7.0, rng.normal(100.0, 10.0, n))  # constant in training
    frame["nearly"] = np.where(np.arange(n) == 5, "other", "same")  # one row of 2,000 differs
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    flags = ["--format", "csv", "--categorical", "city", "nearly", "--numeric", "x", "flat", "--label", "y",
             "--example-id", "id", "--ds-column", "day"]
    models = tmp_path / "models"
    assert main(["train", "--train", str(path), *flags, "--ds", "2026-05-01", "--set",
                 "pipelines={fnn: {arch: fnn, hidden: [8]}}", "--models-dir", str(models)]) == 0
    err = capsys.readouterr().err
    assert ("2 feature(s) constant or nearly so over the 2,000 training rows: 'nearly' ('same' in 99.95 % of rows); "
            "'flat' (one value, 7.0)") in err
    assert load_table_model(models / "fnn" / "run0.pt").meta["near_constant"] == {
        "nearly": "'same' in 99.95 % of rows", "flat": "one value, 7.0"}

    assert main(["score", "--eval", str(path), "--format", "csv", "--models-dir", str(models),
                 "--out", str(tmp_path / "scores"), "--ds", "2026-05-02"]) == 0
    err = capsys.readouterr().err
    z = pd.read_parquet(tmp_path / "scores")["logit"]
    n_out = int(((z < -50) | (z >= 50)).sum())
    assert n_out > 900  # the 1,000 rows of the day 'flat' varies on
    assert (f"WARNING: {n_out:,} of 1,000 scored rows (1 of 1 models) have logits outside [-50, 50) "
            f"(sanity.max_abs_logit), from {z.min():,.6g} to {z.max():,.6g}: fnn run 0: {n_out:,} of 1,000") in err
    assert main(["score", "--eval", str(path), "--format", "csv", "--models-dir", str(models),
                 "--out", str(tmp_path / "scores"), "--ds", "2026-05-02", "--set",
                 f"sanity.max_abs_logit={float(np.abs(z).max()) * 2}"]) == 0
    assert "WARNING" not in capsys.readouterr().err


def test_a_fixed_set_is_scored_without_an_invented_day(spark: Any, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A table without a day column needed `score --ds <some day>`. It is now written undated, and evaluate reads
    it with columns.ds: null."""
    import shlex

    from ctcalc_spark.cli.main import EXIT_CONFIG, EXIT_INPUT, main

    rows = generate_census_like(1_500, seed=5, n_days=1).drop(columns=["interview date"])
    path = tmp_path / "fixed.csv"
    rows.to_csv(path, index=False)
    c = CENSUS
    models = tmp_path / "models"
    assert main(["train", "--train", str(path), "--format", "csv", "--categorical", *c.categorical, "--numeric",
                 *c.numeric, "--label", c.label, "--positive-label", ">50K", "--example-id", "person id",
                 "--null-values", "?", "--runs", "2", "--arch", "lr", "--models-dir", str(models)]) == 0
    out = tmp_path / "scores"
    capsys.readouterr()
    assert main(["score", "--eval", str(path), "--format", "csv", "--models-dir", str(models), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert [re.sub("-[0-9a-f]{12}-", "-T-", Path(u).name) for u in DeltaTable(str(out)).file_uris()] == [
        "part-T-00000.parquet"]
    got = pd.read_parquet(out)
    assert "ds" not in got.columns and len(got) == 2 * len(rows)
    assert "3,000 rows (2 models) undated (no ds column)" in printed
    step = next(line for line in printed.splitlines() if line.startswith("next: "))
    assert step.endswith("--set columns.ds=null --ds YYYY-MM-DD")
    args = shlex.split(step.removeprefix("next: ").replace("YYYY-MM-DD", "2026-01-01"))[1:]
    assert main(args + ["--set", f"output.path={tmp_path / 'eval'}"]) == 0
    metrics = pd.read_parquet(tmp_path / "eval" / "metrics")
    assert len(metrics) == 2 and (metrics["n_rows"] == len(rows)).all()
    # A rerun replaces the set; --ds has no days to keep; dated partitions do not join an undated table.
    assert main(["score", "--eval", str(path), "--format", "csv", "--models-dir", str(models), "--out", str(out),
                 "--pipeline", "lr"]) == 0
    assert [re.sub("-[0-9a-f]{12}-", "-T-", Path(u).name) for u in DeltaTable(str(out)).file_uris()] == [
        "part-T-00000.parquet"]
    assert main(["score", "--eval", str(path), "--format", "csv", "--models-dir", str(models), "--out", str(out),
                 "--ds", "2026-01-01"]) == EXIT_CONFIG
    assert "the models declare no day column" in capsys.readouterr().err
    assert main(["score", "--eval", str(path), "--format", "csv", "--models-dir", str(models), "--out", str(out),
                 "--set", "scores.ds=2026-01-01"]) == EXIT_INPUT
    assert "holds an undated table" in capsys.readouterr().err


def test_spark_engine_takes_days_writes_a_fixed_set_undated_and_counts_extreme_logits(
        spark: Any, trained: Path, census: dict[str, Path], tmp_path: Path) -> None:
    models = find_models(trained, ["lr"])
    source = TableSource(path=str(census["eval"]), format="csv")
    out = str(tmp_path / "scores")
    scored = score_spark(spark, read_spark_table(spark, source), models, days=[EVAL_DAYS[1]], files_per_partition=1)
    write_spark_scores(scored, out)
    report = spark_table_report(spark, out, list(models), max_abs_logit=0.5)
    assert report.days == [EVAL_DAYS[1]]
    local = score_table(models, source, tmp_path / "local", days=[EVAL_DAYS[1]], max_abs_logit=0.5)
    assert report.rows_per_day == local.rows_per_day and report.extreme.keys() == local.extreme.keys()
    for key, (n_out, n, lo, hi) in local.extreme.items():
        assert report.extreme[key][:2] == (n_out, n) and report.extreme[key][2:] == pytest.approx((lo, hi), abs=1e-6)
    assert sum(v[0] for v in local.extreme.values()) > 0 and local.extreme_lines()[0].startswith("WARNING: ")
    # Undated: the models of a table without a day column, scored without a day.
    rows = pd.read_csv(census["eval"]).drop(columns=["interview date"])
    cols = dataclasses.replace(CENSUS, ds=None, passthrough=())
    train_table_models({"lr": ModelSpec(arch="lr")}, pa.Table.from_pandas(rows), cols, seeds=[0],
                       models_dir=tmp_path / "m")
    undated = score_spark(spark, spark.createDataFrame(rows), find_models(tmp_path / "m"))
    assert "ds" not in undated.columns
    write_spark_scores(undated, str(tmp_path / "fixed"))
    fixed = spark_table_report(spark, str(tmp_path / "fixed"), [("lr", 0)])
    assert fixed.undated and fixed.rows_per_day == {"undated": len(rows)} and fixed.files_per_day["undated"] >= 1
    assert "ds" not in read_delta_table(tmp_path / "fixed").columns
    with pytest.raises(InputError, match="holds an undated table"):  # dated partitions do not join it
        write_spark_scores(scored, str(tmp_path / "fixed"))


def test_docs_list_every_model_setting_and_config_key_with_its_default() -> None:
    from ctcalc_spark.upstream.config import UpstreamConfig
    from ctcalc_spark.upstream.models import settings_table

    doc = (Path(__file__).resolve().parents[1] / "docs" / "upstream.md").read_text(encoding="utf-8")
    assert settings_table() in doc  # generated from ModelSpec: a new setting or a changed default shows here
    assert {f.name for f in dataclasses.fields(ModelSpec)} == {
        line.split("`")[1] for line in settings_table().splitlines()[2:]}

    import typing

    hints = typing.get_type_hints(UpstreamConfig)
    missing = []
    for f in dataclasses.fields(UpstreamConfig):
        sub = hints[f.name]
        names = ([f"{f.name}.{g.name}" for g in dataclasses.fields(sub)]
                 if dataclasses.is_dataclass(sub) and f.name != "spark" else [f.name])
        for name in names:
            leaf = name.split(".", 1)[-1]
            if f"`{name}`" not in doc and not (name.split(".")[0].endswith("_table") and f"`*.{leaf}`" in doc):
                missing.append(name)
    assert missing == []
