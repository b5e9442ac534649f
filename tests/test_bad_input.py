"""Bad input against the evaluate job (issue 12's battery): each case ends in a one-line error naming what was
expected and how to fix it, a status or a count, never a traceback, a silent wrong number or lost rows.

docs/bad-input.md lists what the user sees for each input; a test below pins each line of it.
"""
from __future__ import annotations

import pytest

from ctcalc_spark.config import ConfigError, config_from_dict, read_yaml

DS = "2026-11-21"


# ---- configuration ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "message"), [
    ("split.bias_fraction", "abc", "'split.bias_fraction' must be a finite number, got 'abc' (str)"),
    ("histogram.bin_width", [0.1], "'histogram.bin_width' must be a finite number, got [0.1] (list)"),
    ("spark.shuffle_partitions", "abc", "'spark.shuffle_partitions' must be an integer, got 'abc' (str)"),
    ("spark.shuffle_partitions", 2.5, "'spark.shuffle_partitions' must be an integer, got 2.5 (float)"),
    ("spark.shuffle_partitions", 0, "'spark.shuffle_partitions' must be an integer >= 1, got 0"),
    ("spark.driver_memory", "lots", "'spark.driver_memory' must be a JVM memory size like '2g'"),
    ("spark.conf", ["a"], "'spark.conf' must be a mapping of names to values, got ['a'] (list)"),
    ("spark.conf", {"spark.x": {"y": 1}}, "'spark.conf.spark.x' must be a single value"),
    ("on_invalid", True, "'on_invalid' must be a string, got True (bool)"),
    ("output.lease_timeout_s", "1 hour", "'output.lease_timeout_s' must be an integer, got '1 hour' (str)"),
    ("columns.slices", "country", "'columns.slices' must be a list, got the string 'country'; write [country]"),
    ("histogram.bin_width", "1e-9", r"'histogram.bin_width' must be in [0.0001, 0.5], got 1e-09"),
    ("spark.master", "foo", "'spark.master' must be a Spark master URL: local, local[N]"),
    ("spark.log_level", "LOUD", "'spark.log_level': Log level must be one of ['ALL'"),
    ("spark.conf", {"spark.sql.shuffle.partitions": "abc"},
     "'spark.conf.spark.sql.shuffle.partitions' must be an integer >= 1, got 'abc'"),
    ("spark.conf", {"spark.driver.memory": "zz"}, "'spark.conf.spark.driver.memory' must be a JVM memory size"),
])
def test_config_values_of_the_wrong_type_name_the_key_the_value_and_the_type(tmp_path, key, value, message):
    config = tmp_path / "c.yaml"
    config.write_text("input: {path: x}\n")
    with pytest.raises(ConfigError) as err:
        config_from_dict(read_yaml(config, {key: value}))
    assert message in str(err.value)


def test_numbers_written_with_an_exponent_are_numbers(tmp_path):
    config = tmp_path / "c.yaml"
    # YAML 1.1 reads 1e-9 (no dot) as a string: each of these used to end in "'<' not supported between ..."
    config.write_text("input: {path: x}\nclip_eps: 1e-9\nsplit: {bias_fraction: 1e-1}\nhistogram: {bin_width: 1e-3}\n"
                      "max_bias_rows_multiclass: 1e6\nspark: {shuffle_partitions: '8', conf: {a.b: true, c: 2}}\n")
    cfg = config_from_dict(read_yaml(config))
    assert (cfg.clip_eps, cfg.split.bias_fraction, cfg.histogram.bin_width) == (1e-9, 0.1, 1e-3)
    assert cfg.max_bias_rows_multiclass == 1_000_000 and cfg.spark.shuffle_partitions == 8
    assert cfg.spark.conf == {"a.b": "true", "c": "2"}


def test_a_bad_spark_setting_exits_3_with_one_line(tmp_path, capsys):
    from ctcalc_spark.cli.main import main

    config = tmp_path / "c.yaml"
    config.write_text(f"input: {{path: {tmp_path}}}\n")
    code = main(["evaluate", "--config", str(config), "--ds", DS, "--set", "spark.shuffle_partitions=abc"])
    err = capsys.readouterr().err.strip()
    assert code == 3 and "Traceback" not in err and len(err.splitlines()) == 1
    assert "'spark.shuffle_partitions' must be an integer, got 'abc' (str)" in err


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
