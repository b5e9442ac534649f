"""The tests' S3-compatible server: moto's server mode on loopback, started by scripts/s3_server.sh.

The server checks request signatures: its first calls (unsigned) make an IAM user with S3 rights and an access
key, and every call after them must be signed with that key, as on S3. A server that cannot start fails the test
that asked for it (no skip).
"""
from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "s3_server.sh"
REGION = "us-east-1"
BUCKET = "ctcalc-test"


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    state: Path

    def env(self) -> dict[str, str]:
        """The environment a deployment sets for S3 (the names the AWS SDKs, Hadoop's s3a and delta-rs read)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key,
                "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ALLOW_HTTP": "true"}

    def storage_options(self) -> dict[str, str]:
        """delta-rs's options for this server, credentials included."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true"}

    def client(self, secret: str | None = None):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=self.access_key,
                            aws_secret_access_key=secret or self.secret_key)

    def url(self, key: str, scheme: str = "s3") -> str:
        return f"{scheme}://{self.bucket}/{key}"

    def fresh_prefix(self, name: str) -> str:
        return f"{name}-{uuid.uuid4().hex[:8]}"

    def stop(self) -> None:
        subprocess.run(["bash", str(SCRIPT), "stop", str(self.state)], check=False)


def start_s3(state: Path) -> S3Server:
    """Start the server, make its user, key and bucket; RuntimeError naming the cause when any step fails."""
    import boto3

    done = subprocess.run(["bash", str(SCRIPT), "start", str(state)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/s3_server.sh could not start the S3 server: {done.stderr.strip()}")
    endpoint = done.stdout.strip().splitlines()[-1]
    try:
        iam = boto3.client("iam", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="unsigned",
                           aws_secret_access_key="unsigned")
        iam.create_user(UserName="ctcalc")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        iam.put_user_policy(UserName="ctcalc", PolicyName="s3", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="ctcalc")["AccessKey"]
        server = S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"], BUCKET, state)
        server.client().create_bucket(Bucket=BUCKET)
    except Exception:
        subprocess.run(["bash", str(SCRIPT), "stop", str(state)], check=False)
        raise
    return server
