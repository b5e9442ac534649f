"""Hide secrets in anything a report, a log line or a task echoes back (configs, option maps, URLs).

A value is hidden when its key looks like a secret: one of the words in
:data:`SECRET_WORDS` appears in the key, compared word by word after splitting
on ``.``, ``_``, ``-`` and case changes (``kafka.sasl.jaas.config``,
``ssl.key.password``, ``apiKey``, ``AWS_SECRET_ACCESS_KEY``). Nested mappings
and lists under such a key are walked rather than blanked, so only the scalar
values go. Independently of keys, ``user:password@`` in a URL is hidden
(``s3a://AKIA...:xyz@bucket/path`` becomes ``s3a://***@bucket/path``), and so are
secret-looking URL parameters (a Spark Connect ``sc://host:15002/;token=...``).

>>> redact({"stream": {"kafka_options": {"kafka.sasl.jaas.config": "... password='p';", "kafka.acks": "all"}}})
{'stream': {'kafka_options': {'kafka.sasl.jaas.config': '***', 'kafka.acks': 'all'}}}
"""
from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

MASK = "***"

SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "secret", "secrets", "token", "tokens", "credential", "credentials",
    "key", "keys", "apikey", "jaas", "auth", "authorization", "cookie", "signature", "sig", "sas", "private",
})
"""Words that make a key secret. 'key' is broad on purpose (``ssl.key``, ``access_key``); a harmless
``key.deserializer`` is hidden too, which costs nothing in a report."""

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_URL_PARAM = re.compile(r"(?P<sep>[;?&:])(?P<name>[A-Za-z0-9_.-]+)=(?P<value>[^;&#\s]*)")
# JDBC URLs that are no scheme://: Derby's parameters (jdbc:derby:;databaseName=m;password=p), Oracle's
# user/password@ (jdbc:oracle:thin:scott/tiger@//host:1521/svc); they hold the secrets of a metastore's database
_JDBC_USER = re.compile(r"(?P<scheme>jdbc:oracle:[A-Za-z0-9]+:)(?P<userinfo>[^@/\s;]+/[^@\s;]+)@", re.IGNORECASE)
_URL_LIKE = re.compile(r"://|jdbc:", re.IGNORECASE)


def key_words(key: str) -> list[str]:
    """Lower-case words of a key: ``'kafka.sasl.jaas.config'`` -> kafka sasl jaas config; ``'apiKey'`` -> api key."""
    return [w.lower() for part in re.split(r"[^A-Za-z0-9]+", str(key)) for w in _WORD.findall(part)]


def is_secret_key(key: str) -> bool:
    """Whether values under ``key`` are hidden (``'apikey'`` and ``'api_key'`` both are)."""
    words = key_words(key)
    return any(w in SECRET_WORDS for w in words) or "".join(words) in SECRET_WORDS


def redact_url(text: str) -> str:
    """``scheme://user:password@host`` -> ``scheme://***@host``, and secret URL parameters
    (``sc://host:15002/;token=abc``, ``?sig=...&password=...``) -> ``name=***``, wherever they appear in ``text``;
    JDBC URLs without ``://`` too (``jdbc:derby:;password=p``, ``jdbc:oracle:thin:scott/tiger@host``).

    >>> redact_url("jdbc:oracle:thin:scott/tiger@//db:1521/x and jdbc:derby:;databaseName=m;password=p")
    'jdbc:oracle:thin:***@//db:1521/x and jdbc:derby:;databaseName=m;password=***'
    """
    if not _URL_LIKE.search(text):
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    text = _JDBC_USER.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    return _URL_PARAM.sub(lambda m: f"{m.group('sep')}{m.group('name')}={MASK}" if is_secret_key(m.group("name"))
                          else m.group(0), text)


def url_secrets(text: str) -> list[str]:
    """The secret parts :func:`redact_url` hides in ``text`` (user info, secret URL parameters such as a Spark
    Connect ``;token=``), as written and percent-decoded: what a log masker must hide on its own."""
    from urllib.parse import unquote

    if not _URL_LIKE.search(text):
        return []
    found = [m.group("userinfo") for pattern in (_URL_USERINFO, _JDBC_USER) for m in pattern.finditer(text)]
    found += [m.group("value") for m in _URL_PARAM.finditer(text)
              if is_secret_key(m.group("name")) and m.group("value")]
    return list(dict.fromkeys(x for v in found for x in (v, unquote(v))))


def redact_assignment(text: str) -> str:
    """A ``KEY=VALUE`` override (``--set`` / ``--conf``) with a secret-looking key -> ``KEY=***``."""
    key, sep, value = text.partition("=")
    if sep and is_secret_key(key.strip()):
        return f"{key}={MASK}"
    return redact_url(text)


def redact(value: Any, *, key: str | None = None) -> Any:
    """A copy of ``value`` (mappings, lists, tuples, scalars) with secret values replaced by :data:`MASK`.

    ``key``: the key ``value`` sits under, when the caller has one. Strings that are not
    under a secret key keep their text, minus URL credentials; ``KEY=VALUE`` strings in a
    list are judged by their own key.
    """
    if isinstance(value, Mapping):
        return {k: redact(v, key=str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [redact_assignment(v) if isinstance(v, str) and "=" in v else redact(v, key=key) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if key is not None and is_secret_key(key) and value is not None and value != "":
        return MASK
    if isinstance(value, str):
        return redact_url(value)
    return value


# ---- what the Airflow DAGs echo: command lines whose ``--set key={...}`` values are JSON objects, and the values
# for Airflow's log masker

def _json_mapping(text: str) -> Mapping[str, Any] | None:
    """``text`` as a JSON object, or None when it is not one."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, Mapping) else None


def redact_value(key: str, value: Any) -> Any:
    """``value`` with its secret parts replaced by ``***``: the whole value under a secret key, nested keys of
    mappings and of JSON object strings otherwise, and URL credentials."""
    parsed = _json_mapping(value) if isinstance(value, str) and not is_secret_key(key) else None
    return json.dumps(redact(parsed)) if parsed is not None else redact(value, key=key)


def redact_args(args: Sequence[str]) -> list[str]:
    """Command-line arguments with the value of every secret-looking ``key=value`` redacted."""
    out = []
    for arg in args:
        key, eq, value = str(arg).partition("=")
        out.append(f"{key}={redact_value(key, value)}" if eq and not key.startswith("-") else redact_url(str(arg)))
    return out


def redact_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the run settings fit for a log: secret-looking keys and ``k=v`` arguments redacted."""
    return {key: (redact_args(value) if isinstance(value, list) and all(isinstance(v, str) for v in value)
                  else redact_value(key, value)) for key, value in settings.items()}


def redact_text(text: str) -> str:
    """A raw setting value quoted in an error message: reduced to its length when it may hold secrets."""
    return f"<{len(text)} characters>" if SECRET_WORDS & set(key_words(text)) else redact_url(text)


def secret_values(*settings: Mapping[str, Any] | Sequence[str]) -> list[str]:
    """Every value under a secret-looking key (and every string holding URL credentials), for Airflow's log
    masker (``airflow.sdk.log.mask_secret``), which then hides them wherever they appear."""
    found: list[str] = []

    def walk(key: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(str(k), v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(key, v)
        elif is_secret_key(key) and value not in (None, ""):
            found.append(value if isinstance(value, str) else json.dumps(value))
        elif isinstance(value, str):
            parsed = _json_mapping(value)
            if parsed is not None:
                walk(key, parsed)
            elif redact_url(value) != value:
                found.extend([value, *url_secrets(value)])  # the credentials alone too, wherever they turn up

    for s in settings:
        if isinstance(s, Mapping):
            walk("", s)
        else:
            for arg in s:
                k, eq, v = str(arg).partition("=")
                walk(k, v) if eq and not k.startswith("-") else walk("", str(arg))
    return sorted(set(found))


def printable(value: Any) -> str:
    """A name as one line of output shows it: control characters escaped (``'a\\nb'`` -> ``a\\nb``), so that a
    model called ``"a\\nctcalc evaluate: done"`` cannot write a line of its own.

    >>> printable("a\\nb"), printable("ok")
    ('a\\\\nb', 'ok')
    """
    text = str(value)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a CSV cell as a formula (OWASP's CSV injection list)."""


def spreadsheet_safe(frame: Any) -> Any:
    """A copy of a pandas frame for a CSV report: text cells that start like a formula (a model named
    ``=HYPERLINK(…)``, ``@SUM(…)``, ``-2+3``) get a ``'`` in front, which spreadsheets show as text; text that is a
    number (a run ``-1``) stays as it is. Number columns are left alone.

    >>> import pandas as pd
    >>> spreadsheet_safe(pd.DataFrame({"model": ["=1+2", "a", "-1", "@x"], "v": [-1.0, 2.0, 3.0, 4.0]})).to_dict("list")
    {'model': ["'=1+2", 'a', '-1', "'@x"], 'v': [-1.0, 2.0, 3.0, 4.0]}
    """
    out = frame.copy()
    for name in out.columns:
        if out[name].dtype == object or str(out[name].dtype) in ("string", "str"):
            out[name] = out[name].map(_cell)
    return out


def _cell(value: Any) -> Any:
    if not isinstance(value, str) or not value.startswith(FORMULA_START):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value
