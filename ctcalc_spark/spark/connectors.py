"""Spark's failure to open a path for want of a Hadoop file system for its scheme, said as what to add."""
from __future__ import annotations

import os
import re

from ctcalc_spark.redact import redact_url

_NO_FILESYSTEM = re.compile(r'No FileSystem for scheme "?([\w+.-]+)"?')
_MISSING_CLASS = re.compile(r"Class ((?:org\.apache\.hadoop\.fs|com\.google\.cloud\.hadoop\.fs)\.[\w.$]+) not found")


def hadoop_version() -> str | None:
    """The Hadoop version of the pip-installed pyspark (its hadoop-client-api jar), or None."""
    import glob

    try:
        import pyspark
    except ImportError:
        return None
    jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar"))
    m = re.search(r"hadoop-client-api-([\d.]+)\.jar$", jars[0]) if jars else None
    return m.group(1) if m else None


_CLASS_SCHEMES = {"S3AFileSystem": "s3a", "GoogleHadoopFileSystem": "gs", "AzureBlobFileSystem": "abfs",
                  "SecureAzureBlobFileSystem": "abfss", "NativeAzureFileSystem": "wasb"}


def connector_error(error: BaseException | str, uri: str | None = None) -> str | None:
    """One line for Spark's failure to open a path because it has no Hadoop file system for its scheme (no
    connector jar on the class path: ``No FileSystem for scheme "s3"``, ``Class ...S3AFileSystem not found``):
    what is missing and how to add it. ``uri``: the path, when known. None when ``error`` is about something
    else."""
    text = str(error)
    m = _NO_FILESYSTEM.search(text) or _MISSING_CLASS.search(text)
    if m is None:
        return None
    if m.re is _NO_FILESYSTEM:
        scheme, cause = m.group(1).lower(), f'no FileSystem for scheme "{m.group(1)}"'
    else:
        scheme, cause = _CLASS_SCHEMES.get(m.group(1).rsplit(".", 1)[-1], ""), f"class {m.group(1)} not found"
    if uri is not None and "://" in uri:
        scheme = uri.split("://", 1)[0].lower()
    if not scheme:
        return None
    uri = redact_url(uri) if uri else f"{scheme}://..."  # s3a://KEY:SECRET@bucket: the message is echoed
    version = hadoop_version() or "<the Hadoop version of your Spark>"

    def package(artifact: str) -> str:
        return (f"set spark.conf: {{spark.jars.packages: 'org.apache.hadoop:{artifact}:{version}'}} (the Hadoop "
                f"version of this Spark; spark-submit --packages works too)")

    if scheme == "s3":
        fix = (f"Open-source Spark reads S3 as s3a://: write s3a://{uri.split('://', 1)[1]} and "
               f"{package('hadoop-aws')}, with credentials in spark.hadoop.fs.s3a.* or the AWS environment. EMR and "
               "Databricks clusters have their own s3:// connector.")
    elif scheme in ("s3a", "s3n"):
        fix = (f"Put hadoop-aws on Spark's class path: {package('hadoop-aws')}, with credentials in "
               "spark.hadoop.fs.s3a.* or the AWS environment.")
    elif scheme == "gs" and "org.apache.hadoop.fs.gs." in text:  # Hadoop 3.5's own connector, module hadoop-gcp
        fix = (f"Put hadoop-gcp on Spark's class path: {package('hadoop-gcp')}; or Google's gcs-connector jar "
               "(spark.jars) with spark.hadoop.fs.gs.impl: com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem. "
               "Dataproc clusters have a connector.")
    elif scheme == "gs":
        fix = ("Put Google's Cloud Storage connector for Hadoop (the shaded gcs-connector jar) on Spark's class path "
               "(spark.conf: {spark.jars: <its path or URL>}); Dataproc clusters have it.")
    elif scheme in ("abfs", "abfss", "wasb", "wasbs"):
        fix = f"Put hadoop-azure on Spark's class path: {package('hadoop-azure')}."
    else:
        fix = (f"Put the Hadoop file system for {scheme}:// on Spark's class path (spark.conf: spark.jars or "
               "spark.jars.packages).")
    return f"Spark has no file system for {scheme}:// here ({cause}), so it cannot open {uri!r}. {fix}"
