"""The blob store, result sidecars and job journal in an S3 bucket, for nodes that share
nothing but Redis and the bucket.

Layout under `s3://BUCKET[/PREFIX]`:
  blobs/sha256/<aa>/<sha256>                   written once (If-None-Match: *), with kind,
                                               suffix, MIME type and size as metadata
  results/<capability>/<version>/<sha256>.json the result sidecars (the truth; Redis indexes)
  jobs/<job id>.json                           the journal of submitted, unfinished jobs
  index/...                                    markers that list blobs by kind and results
                                               not done, for planning (index_layout.py)

The client is boto3. obstore is faster per request (see `make bench`), but its Tokio
runtime does not survive a fork: a Celery prefork child hangs on its first call once its
parent made one (a worker's heartbeat reads the journal). Credentials come from the settings,
which read the standard AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
AWS_REGION variables.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from pipelines.errors import ConfigError
from pipelines.media import Capability
from pipelines.results import Envelope, ResultKey, Status
from workers.files.blobs import READ_CHUNK, BlobMissing, BlobRef
from workers.files.index_layout import input_marker, output_marker, unsettled_prefix
from workers.files.journal import Entry

if TYPE_CHECKING:
    from workers.core.settings import StoreSettings

PUT_WITHOUT_HEAD = 1 << 20  # bytes; above this, HEAD before PUT
_ABSENT = frozenset({"NoSuchKey", "404", "NotFound"})
_EXISTS = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict"})
_REFUSED = frozenset(
    {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken"}
)


@dataclass(frozen=True, slots=True)
class Location:
    bucket: str
    prefix: str  # "" or "some/prefix/"

    @classmethod
    def parse(cls, url: str) -> Location:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise ConfigError(f"MCP_MEDIA_STORE__URL must be s3://BUCKET[/PREFIX], not {url!r}")
        prefix = parts.path.strip("/")
        return cls(parts.netloc, f"{prefix}/" if prefix else "")

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class S3Bucket:
    """The objects of one bucket below one prefix. Safe to share between threads; a forked
    process makes its own (each worker process opens its storage after the fork)."""

    def __init__(self, config: StoreSettings) -> None:
        assert config.url is not None
        self.location = Location.parse(config.url)
        self.endpoint = config.endpoint_url
        session = boto3.session.Session(
            aws_access_key_id=config.access_key_id or None,
            aws_secret_access_key=config.secret_access_key.get_secret_value() or None,
            aws_session_token=config.session_token.get_secret_value() or None,
            region_name=config.region or "us-east-1",
        )
        self.client: Any = session.client(
            "s3",
            endpoint_url=self.endpoint or None,
            config=Config(
                connect_timeout=min(config.timeout, 5.0),
                read_timeout=config.timeout,
                retries={"max_attempts": 3, "mode": "standard"},
                max_pool_connections=16,
                # Blobs are checked by their sha256 and sidecars are small: no per-request
                # CRC32 on top (it costs about 0.5 ms a request here).
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                s3={"addressing_style": "path" if self.endpoint else "auto"},
            ),
        )

    def describe(self) -> str:
        where = f" at {self.endpoint}" if self.endpoint else ""
        return f"{self.location}{where}"

    def path(self, key: str) -> str:
        return self.location.prefix + key

    def check(self) -> None:
        """One listing call: a missing bucket, refused credentials or an unreachable
        endpoint become one line naming the cause."""
        try:
            self.client.list_objects_v2(
                Bucket=self.location.bucket, Prefix=self.path("blobs/"), MaxKeys=1
            )
        except ClientError as exc:
            code = _code(exc)
            if code in _REFUSED:
                cause = "our credentials were refused: check AWS_ACCESS_KEY_ID and "
                cause += "AWS_SECRET_ACCESS_KEY"
            elif code in ("NoSuchBucket", "404"):
                cause = (
                    f"the bucket {self.location.bucket!r} does not exist (create it once, e.g. "
                    f"`aws s3 mb s3://{self.location.bucket}`; mcp-media never creates buckets)"
                )
            else:
                cause = f"it answered {code or 'an error'} ({_first_line(exc)})"
            raise ConfigError(f"blob store {self.describe()}: {cause}") from exc
        except NoCredentialsError as exc:
            raise ConfigError(
                f"blob store {self.describe()}: no credentials: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY"
            ) from exc
        except (BotoCoreError, OSError) as exc:
            raise ConfigError(
                f"blob store {self.describe()}: cannot reach it ({_first_line(exc)})"
            ) from exc

    def put_file(self, key: str, source: Path, metadata: dict[str, str], mime: str) -> bool:
        """Write once (If-None-Match: *); False when the object already exists."""
        try:
            with source.open("rb") as handle:
                # A small blob goes as bytes: a file body makes botocore wait for a
                # `100 Continue` first.
                size = source.stat().st_size
                body = handle.read() if size <= PUT_WITHOUT_HEAD else handle
                self.client.put_object(
                    Bucket=self.location.bucket,
                    Key=self.path(key),
                    Body=body,
                    ContentType=mime,
                    Metadata=metadata,
                    IfNoneMatch="*",
                )
        except ClientError as exc:
            if _code(exc) in _EXISTS:
                return False
            raise
        return True

    def put_bytes(self, key: str, data: bytes, *, new_only: bool = False) -> bool:
        """Write the object; `new_only`: only if it does not exist yet (If-None-Match: *),
        False when it did."""
        extra = {"IfNoneMatch": "*"} if new_only else {}
        try:
            self.client.put_object(
                Bucket=self.location.bucket, Key=self.path(key), Body=data, **extra
            )
        except ClientError as exc:
            if new_only and _code(exc) in _EXISTS:
                return False
            raise
        return True

    def head(self, key: str) -> dict[str, Any] | None:
        """Size, modification time and metadata, else None."""
        try:
            found = self.client.head_object(Bucket=self.location.bucket, Key=self.path(key))
        except ClientError as exc:
            if _code(exc) in _ABSENT:
                return None
            raise
        return {
            "size": found["ContentLength"],
            "modified": found["LastModified"].timestamp(),
            "metadata": dict(found.get("Metadata") or {}),
        }

    def _get(self, key: str) -> Any:
        try:
            return self.client.get_object(Bucket=self.location.bucket, Key=self.path(key))
        except ClientError as exc:
            if _code(exc) in _ABSENT:
                return None
            raise

    def get_bytes(self, key: str) -> bytes | None:
        found = self._get(key)
        if found is None:
            return None
        with found["Body"] as body:
            data: bytes = body.read()
            return data

    def stream(self, key: str) -> Iterator[bytes] | None:
        """The object's bytes in chunks, or None when it is absent."""
        found = self._get(key)
        if found is None:
            return None
        return _chunks(found["Body"])

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.location.bucket, Key=self.path(key))

    def listing(self, prefix: str, after: str = "") -> Iterator[tuple[str, float, int]]:
        """(key below our prefix, modified unix time, size) of every object under `prefix`
        whose key sorts after `prefix + after`, in key order (about 1,000 a request)."""
        strip = len(self.location.prefix)
        start = {"StartAfter": self.path(prefix + after)} if after else {}
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.location.bucket, Prefix=self.path(prefix), **start
        )
        for page in pages:
            for item in page.get("Contents") or []:
                yield item["Key"][strip:], item["LastModified"].timestamp(), item["Size"]


def _chunks(body: Any) -> Iterator[bytes]:
    with body:
        yield from body.iter_chunks(READ_CHUNK)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


class S3Blobs:
    """The blob store of a shared-nothing cluster."""

    remote = True

    def __init__(self, bucket: S3Bucket) -> None:
        self.bucket = bucket

    def describe(self) -> str:
        return self.bucket.describe()

    def check(self) -> None:
        self.bucket.check()

    def has(self, ref: BlobRef) -> bool:
        return self.bucket.head(ref.key) is not None

    def put(
        self, ref: BlobRef, source: Path, mime: str | None = None, output: bool = False
    ) -> bool:
        """Written once: a large blob is looked up first (a HEAD is cheaper than sending
        its bytes again); a small one is sent at once, the bucket refusing a second copy.
        A blob written here is then indexed: one marker, after the blob (a crash between
        the two leaves a blob the next backfill indexes, never a marker without its blob)."""
        if ref.size > PUT_WITHOUT_HEAD and self.has(ref):
            return False
        metadata = {"kind": ref.kind.value, "ext": ref.ext, "size": str(ref.size)}
        if output:
            metadata["output"] = "1"
        mime = mime or "application/octet-stream"
        if not self.bucket.put_file(ref.key, source, metadata, mime):
            return False
        marker = output_marker(ref.sha256) if output else input_marker(ref, time.time())
        self.bucket.put_bytes(marker, b"")
        return True

    def chunks(self, ref: BlobRef) -> Iterator[bytes]:
        found = self.bucket.stream(ref.key)
        if found is None:
            raise BlobMissing(f"blob {ref.sha256} is not in {self.describe()}")
        return found

    def close(self) -> None:
        return None


class S3Sidecars:
    """Result sidecars in the bucket: what every node reads when Redis has no index entry."""

    def __init__(self, bucket: S3Bucket) -> None:
        self.bucket = bucket

    @staticmethod
    def _key(key: ResultKey) -> str:
        return f"results/{key.capability.value}/{key.version}/{key.sha256}.json"

    def read(self, key: ResultKey) -> Envelope | None:
        raw = self.bucket.get_bytes(self._key(key))
        return _envelope(raw) if raw is not None else None

    def write(self, envelope: Envelope) -> str:
        self.replace(envelope)
        return self._key(envelope.key)

    def replace(self, envelope: Envelope) -> Status | None:
        """A new key's sidecar is one conditional PUT; only a key stored again (a retry, a
        forced run) reads the sidecar it replaces."""
        key = self._key(envelope.key)
        data = json.dumps(envelope.to_json(), ensure_ascii=False).encode()
        if self.bucket.put_bytes(key, data, new_only=True):
            before = None
        else:
            raw = self.bucket.get_bytes(key)
            found = _envelope(raw) if raw is not None else None
            self.bucket.put_bytes(key, data)
            before = found.status if found is not None else None
        # The index of results that are not done (`--include-degraded` plans from it).
        marker = unsettled_prefix(envelope.key.capability, envelope.key.version)
        marker += envelope.key.sha256
        if envelope.status is not Status.DONE and before in (None, Status.DONE):
            self.bucket.put_bytes(marker, b"")
        elif envelope.status is Status.DONE and before not in (None, Status.DONE):
            self.bucket.delete(marker)
        return before

    def scan(self) -> Iterator[Envelope]:
        return self._scan("results/")

    def scan_capability(self, capability: Capability) -> Iterator[Envelope]:
        return self._scan(f"results/{capability.value}/")

    def _scan(self, prefix: str) -> Iterator[Envelope]:
        for key, _modified, _size in self.bucket.listing(prefix):
            raw = self.bucket.get_bytes(key)
            envelope = _envelope(raw) if raw is not None else None
            if envelope is not None:
                yield envelope


def _envelope(raw: bytes) -> Envelope | None:
    try:
        return Envelope.from_json(json.loads(raw))
    except (ValueError, KeyError, TypeError):
        return None


class S3Journal:
    """The journal of submitted, unfinished jobs in the bucket: a job submitted on one node
    is re-sent by any node's recovery sweep if its message is lost."""

    def __init__(self, bucket: S3Bucket) -> None:
        self.bucket = bucket

    @staticmethod
    def _key(job_id: str) -> str:
        if not job_id or "/" in job_id or job_id.startswith("."):
            raise ValueError(f"not a job id: {job_id[:80]!r}")
        return f"jobs/{job_id}.json"

    def add(self, job_id: str, body: dict[str, Any]) -> None:
        self.bucket.put_bytes(self._key(job_id), json.dumps(body).encode())

    def touch(self, job_id: str) -> None:
        body = self.get(job_id)
        if body is not None:
            self.add(job_id, body)  # a rewrite is an object store's only utime

    def remove(self, job_id: str) -> None:
        self.bucket.delete(self._key(job_id))

    def get(self, job_id: str) -> dict[str, Any] | None:
        raw = self.bucket.get_bytes(self._key(job_id))
        if raw is None:
            return None
        try:
            body = json.loads(raw)
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def entries(self) -> Iterator[Entry]:
        for key, modified, _size in self.bucket.listing("jobs/"):
            name = key.rsplit("/", 1)[-1]
            if not name.endswith(".json"):
                continue
            job_id = name[: -len(".json")]
            body = self.get(job_id)
            if body is not None:
                yield Entry(job_id, body, modified)
