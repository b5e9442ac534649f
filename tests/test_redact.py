"""Redaction of secrets in echoed configs, and safe path components for user-supplied names."""
from __future__ import annotations

import dataclasses

import pytest

from ctcalc_spark.config import config_from_dict, config_to_dict
from ctcalc_spark.errors import ConfigError
from ctcalc_spark.pathsafe import child_path, safe_component, write_atomic
from ctcalc_spark.redact import MASK, is_secret_key, key_words, redact, redact_assignment, redact_url


@pytest.mark.parametrize("key", [
    "password", "kafka.sasl.jaas.config", "kafka.ssl.key.password", "kafka.ssl.truststore.password", "apiKey",
    "api_key", "APIKEY", "AWS_SECRET_ACCESS_KEY", "fs.s3a.secret.key", "token", "auth_token", "client-secret",
    "credentials", "spark.hadoop.fs.azure.sas.fixed.token", "private_key", "Authorization",
])
def test_secret_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", [
    "kafka.bootstrap.servers", "kafka.security.protocol", "kafka.sasl.mechanism", "bias_threshold", "model",
    "kafka_topic", "kafka.ssl.keystore.location", "output", "path", "monkey", "tokenizer_name", "author",
])
def test_plain_keys(key):
    assert not is_secret_key(key)


def test_key_words_split_on_separators_and_case():
    assert key_words("kafka.sasl.jaas.config") == ["kafka", "sasl", "jaas", "config"]
    assert key_words("AWS_SECRET_ACCESS_KEY") == ["aws", "secret", "access", "key"]
    assert key_words("sslKeyPassword") == ["ssl", "key", "password"]
    assert key_words("HTTPProxy") == ["http", "proxy"]


def test_redact_a_whole_job_config():
    cfg = config_from_dict({
        "input": {"path": "s3a://AKIAXYZ:wJalrXUtn@bucket/eval"}, "output": {"path": "/data/out"},
        "stream": {"source": "kafka", "kafka_bootstrap_servers": "b:9092", "kafka_topic": "t",
                   "kafka_options": {"kafka.sasl.jaas.config": "x required username='u' password='hunter2';",
                                     "kafka.sasl.mechanism": "PLAIN", "kafka.ssl.key.password": "k"}},
    })
    out = redact(config_to_dict(cfg))
    text = repr(out)
    assert "hunter2" not in text and "wJalrXUtn" not in text and "AKIAXYZ" not in text
    assert out["stream"]["kafka_options"] == {"kafka.sasl.jaas.config": MASK, "kafka.sasl.mechanism": "PLAIN",
                                              "kafka.ssl.key.password": MASK}
    assert out["input"]["path"] == "s3a://***@bucket/eval"
    assert out["output"]["path"] == "/data/out" and out["rolling"] == dataclasses.asdict(cfg.rolling)
    assert config_to_dict(cfg)["stream"]["kafka_options"]["kafka.ssl.key.password"] == "k"  # a copy, input kept


def test_redact_walks_nested_values_under_secret_keys_and_keeps_empty_ones():
    out = redact({"credentials": {"user": "u", "password": "p"}, "tokens": ["a", "b"], "token": None, "key": ""})
    assert out == {"credentials": {"user": "u", "password": MASK}, "tokens": [MASK, MASK], "token": None, "key": ""}


def test_redact_overrides_and_urls():
    assert redact_assignment("stream.kafka_options.kafka.ssl.key.password=abc") == \
        "stream.kafka_options.kafka.ssl.key.password=***"
    assert redact_assignment("output.path=hdfs://nn:8020/x") == "output.path=hdfs://nn:8020/x"
    assert redact(["--set", "a.secret=1", ("x", "https://u:p@host/y")]) == \
        ["--set", f"a.secret={MASK}", ("x", "https://***@host/y")]
    assert redact_url("see https://user:pw@example.org and s3://bucket/key") == \
        "see https://***@example.org and s3://bucket/key"
    assert redact_url("sc://host:15002/;user_id=ana;token=abc123;use_ssl=true") == \
        "sc://host:15002/;user_id=ana;token=***;use_ssl=true"
    assert redact_url("https://acct.blob.core.windows.net/c?sv=2024&sig=XYZ&sp=r&api_key=K") == \
        "https://acct.blob.core.windows.net/c?sv=2024&sig=***&sp=r&api_key=***"  # sig: an Azure SAS signature
    assert redact_url("a;token=b") == "a;token=b"  # not a URL: left alone


def test_url_secrets_are_what_redact_url_hides():
    from ctcalc_spark.redact import url_secrets

    assert url_secrets("sc://h:15002/;user_id=me;token=a%2Fb;use_ssl=true") == ["a%2Fb", "a/b"]
    assert url_secrets("see https://user:pw@example.org?sig=XYZ&sp=r") == ["user:pw", "XYZ"]
    assert url_secrets("sc://h:15002") == url_secrets("a;token=b") == []


@pytest.mark.parametrize("name", ["../../ESCAPED", "a/b", "/etc/passwd", "..", ".", "", "-rf", "a\\..\\b",
                                  "$\\frac{a}{$", "x" * 300, "name with spaces", "ünïcode"])
def test_safe_component_stays_one_plain_component(name, tmp_path):
    part = safe_component(name)
    assert part and "/" not in part and "\\" not in part and not part.startswith((".", "-"))
    assert len(part) <= 100
    p = child_path(tmp_path, "compare", part)
    assert p.resolve().parent == (tmp_path / "compare").resolve()


def test_safe_component_keeps_plain_names_and_separates_different_ones():
    assert safe_component("deepfm_bn-v2.1") == "deepfm_bn-v2.1"
    assert safe_component("a/b") != safe_component("a_b") != safe_component("a?b")
    assert safe_component("a/b") == safe_component("a/b")  # deterministic


def test_child_path_guard_catches_a_sanitiser_that_lets_dots_through(monkeypatch):
    import ctcalc_spark.pathsafe as ps

    assert child_path("/out", "../x").parent == child_path("/out", "y").parent
    monkeypatch.setattr(ps, "safe_component", lambda n: n)  # the guard must hold even if the sanitiser regresses
    with pytest.raises(ConfigError, match="inside"):
        ps.child_path("/out", "..", "..", "etc")


def test_report_files_are_replaced_whole_or_not_at_all(tmp_path):
    """write_atomic (every report file): a write that fails midway leaves the previous file and no temporary."""
    report = write_atomic(tmp_path / "report.html", "<p>old</p>")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(report, "<p>new " + "x" * 100_000 + "\ud800</p>")  # fails while writing (a lone surrogate)
    assert report.read_text() == "<p>old</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
    write_atomic(report, "<p>new</p>")
    assert report.read_text() == "<p>new</p>" and sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
