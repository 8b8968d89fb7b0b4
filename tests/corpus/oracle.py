"""What must hold for every ingest of hostile input, shared by the corpus test and the fuzzer.

- `FileAudit`: a `sys.addaudithook` recorder of every file write, rename, mkdir, symlink,
  delete and read the process attempts while ingesting; `outside()` lists those that leave
  the cache root (lexically or through a symlink).
- `check_rendered`: media inside the cache and intact, jobs pointing at them, markers on
  one line, agent text that encodes as UTF-8, no tag characters, no MEDIA: line that is
  neither a cached file nor a verbatim line of the input's own text.
- `check_cache_tree`: every entry under the root resolves inside it, folders 0700, files
  0600, no symlinks but the ones a test planted.
- `snapshot`: a cheap picture of a tree, to prove nothing outside the cache changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.media import MediaKind
from pipelines.render import RenderedResult

MAX_NAME_CHARS = 150
MAX_NAME_BYTES = 255
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# audit event -> positions of the path arguments it changes
_MUTATING: dict[str, tuple[int, ...]] = {
    "os.rename": (0, 1),  # also os.replace
    "os.remove": (0,),  # also os.unlink
    "os.mkdir": (0,),
    "os.rmdir": (0,),
    "os.symlink": (1,),
    "os.link": (1,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.mkfifo": (0,),
    "os.mknod": (0,),
    "shutil.rmtree": (0,),
}
_LISTING = frozenset({"os.listdir", "os.scandir"})


@dataclass(frozen=True, slots=True)
class FileEvent:
    event: str
    path: str
    write: bool


@dataclass(slots=True)
class _Recorder:
    events: list[FileEvent] = field(default_factory=list)


class FileAudit:
    """Records file-system events of this thread while `watch()` is active.

    Audit hooks cannot be removed, so one hook is installed per process and stays idle
    (one attribute test) outside `watch()`.
    """

    _instance: FileAudit | None = None

    def __init__(self) -> None:
        self._local = threading.local()

    @classmethod
    def get(cls) -> FileAudit:
        if cls._instance is None:
            cls._instance = cls()
            sys.addaudithook(cls._instance._hook)
        return cls._instance

    @contextlib.contextmanager
    def watch(self) -> Iterator[list[FileEvent]]:
        recorder = _Recorder()
        self._local.recorder = recorder
        try:
            yield recorder.events
        finally:
            self._local.recorder = None

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        recorder: _Recorder | None = getattr(self._local, "recorder", None)
        if recorder is None:
            return
        if event == "open":
            path, mode, flags = args
            if isinstance(mode, str):
                write = any(ch in mode for ch in "wax+")
            else:
                write = bool((flags or 0) & _WRITE_FLAGS)
            self._add(recorder, event, path, write)
        elif event in _MUTATING:
            for index in _MUTATING[event]:
                self._add(recorder, event, args[index], True)
        elif event in _LISTING and args:
            self._add(recorder, event, args[0], False)

    @staticmethod
    def _add(recorder: _Recorder, event: str, path: Any, write: bool) -> None:
        if isinstance(path, int) or path is None:
            return  # an already-open descriptor: its opening was recorded
        try:
            text = os.fsdecode(path)
        except TypeError:
            text = repr(path)
        recorder.events.append(FileEvent(event, text, write))


def _import_roots() -> tuple[str, ...]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.update(p for p in sys.path if p)
    return tuple(sorted({os.path.realpath(r) for r in roots if os.path.isabs(r)}))


_IMPORT_ROOTS = _import_roots()


def is_inside(path: str | Path, root: str | Path) -> bool:
    """Lexically inside and, through any symlink, still inside."""
    root_real = os.path.realpath(root)
    lexical = os.path.abspath(path)
    base = os.path.abspath(root)
    if lexical != base and not lexical.startswith(base + os.sep):
        return False
    parent = os.path.realpath(os.path.dirname(lexical)) if lexical != base else root_real
    return parent == root_real or parent.startswith(root_real + os.sep)


def outside(events: Iterable[FileEvent], root: Path) -> list[str]:
    """Events that touched a path outside `root` (reads of Python's own files excepted)."""
    bad = []
    for ev in events:
        if is_inside(ev.path, root):
            continue
        if not ev.write and os.path.realpath(ev.path).startswith(_IMPORT_ROOTS):
            continue  # a lazy import (a Pillow plugin, a codec) reading its own source
        bad.append(f"{'write' if ev.write else 'read'} outside the cache: {ev.event} {ev.path}")
    return bad


def input_text_lines(payload: str | bytes | Mapping[str, Any]) -> set[str]:
    """Lines of every `text` string in the input: what a text block may legitimately echo."""
    if isinstance(payload, str | bytes):
        try:
            payload = json.loads(payload)
        except (ValueError, RecursionError):
            return set()
    lines: set[str] = set()
    stack: list[Any] = [payload]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            value = item.get("text")
            if isinstance(value, str):
                shown = strip_tags(value)
                lines.update(shown.split("\n"))
                # A renderer may also replace lone surrogates; the line is still an echo.
                lines.update(_SURROGATES.sub("\ufffd", shown).split("\n"))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return lines


_TAGS = re.compile("[\U000e0000-\U000e007f]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def strip_tags(text: str) -> str:
    return _TAGS.sub("", text)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_rendered(
    out: RenderedResult, root: Path, echo: set[str], *, hash_files: bool = True
) -> list[str]:
    """Problems with one rendered result; an empty list when it is safe."""
    problems: list[str] = []
    root = Path(os.path.abspath(root))
    media_tags = set()
    for m in out.media:
        problems += _check_media(m.kind, m.path, m.size, m.sha256, root, hash_files)
        if m.kind is not MediaKind.DOCUMENT:
            media_tags.add(f"MEDIA:{m.path}")
    stored = {str(m.path): m.sha256 for m in out.media}
    for job in out.jobs:
        if stored.get(str(job.path)) != job.sha256:
            problems.append(f"job {job.capability} points at {job.path}, not a stored blob")
    for mk in out.markers:
        if "\n" in mk.message or "\r" in mk.message:
            problems.append(f"marker message spans lines: {mk.message!r}")
    try:
        out.text.encode("utf-8")
    except UnicodeEncodeError as exc:
        problems.append(f"agent text is not valid Unicode: {exc}")
    try:
        json.dumps(out.to_json())
    except (ValueError, TypeError, RecursionError) as exc:
        problems.append(f"the JSON form cannot be printed: {type(exc).__name__}: {exc}")
    if _TAGS.search(out.text):
        problems.append("tag characters in the agent text")
    for line in out.text.split("\n"):
        if line.startswith("MEDIA:") and line not in media_tags and line not in echo:
            problems.append(f"forged MEDIA: line {line[:120]!r}")
        if line.strip() == "[[audio_as_voice]]" and line not in echo:
            problems.append("forged [[audio_as_voice]] line")
    return problems


def _check_media(
    kind: MediaKind, path: Path, size: int, sha256: str, root: Path, hash_files: bool
) -> list[str]:
    if not path.is_absolute():
        return [f"media path is not absolute: {path}"]
    if not is_inside(path, root):
        return [f"media path outside the cache: {path}"]
    try:
        st = path.lstat()
    except FileNotFoundError:
        return [f"media path does not exist: {path}"]
    if not stat.S_ISREG(st.st_mode):
        return [f"media path is not a regular file: {path}"]
    problems = []
    if st.st_size != size:
        problems.append(f"{path}: {st.st_size} bytes on disk, {size} reported")
    if hash_files and _sha256(path) != sha256:
        problems.append(f"{path}: content does not match its sha256")
    rel = path.relative_to(root).parts
    if kind is MediaKind.DOCUMENT:
        ok = len(rel) == 3 and rel[0] == "documents" and rel[1] == sha256[:16]
    else:
        folder = "images" if kind is MediaKind.IMAGE else "audio"
        ok = len(rel) == 2 and rel[0] == folder and rel[1].startswith(sha256 + ".")
    if not ok:
        problems.append(f"{path}: not where a {kind} with sha256 {sha256[:16]}... belongs")
    name = path.name
    if len(name) > MAX_NAME_CHARS or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        problems.append(f"name too long: {len(name)} characters")
    if any(ch in name for ch in "\x00\\") or name in (".", ".."):
        problems.append(f"unsafe name {name!r}")
    return problems


def check_cache_tree(root: Path, planted: Mapping[Path, str] | None = None) -> list[str]:
    """Every entry under `root` stays inside it, is private, and is no symlink of ours."""
    planted = planted or {}
    problems: list[str] = []
    if not root.exists():
        return problems
    real_root = os.path.realpath(root)
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                if path not in planted:
                    problems.append(f"symlink in the cache: {path} -> {os.readlink(path)}")
                elif os.readlink(path) != planted[path]:
                    problems.append(f"planted symlink {path} was retargeted")
                continue
            real = os.path.realpath(path)
            if not real.startswith(real_root + os.sep):
                problems.append(f"{path} resolves outside the cache: {real}")
            mode = stat.S_IMODE(st.st_mode)
            want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
            if mode != want:
                problems.append(f"{path} has mode {mode:o}, not {want:o}")
    return problems


Snapshot = dict[str, tuple[str, int, int, str]]


def snapshot(top: Path, exclude: Path | None = None) -> Snapshot:
    """Type, size, mtime and (for small files and links) content of everything under `top`."""
    picture: Snapshot = {}
    skip = os.path.abspath(exclude) if exclude is not None else None
    for folder, dirs, files in os.walk(top, followlinks=False):
        if skip is not None:
            dirs[:] = [d for d in dirs if os.path.join(folder, d) != skip]
        for name in dirs + files:
            path = os.path.join(folder, name)
            if path == skip:
                continue
            st = os.lstat(path)
            rel = os.path.relpath(path, top)
            if stat.S_ISLNK(st.st_mode):
                picture[rel] = ("link", 0, 0, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                picture[rel] = ("dir", 0, st.st_mtime_ns, "")
            else:
                content = ""
                if st.st_size <= 1 << 16:
                    content = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                picture[rel] = ("file", st.st_size, st.st_mtime_ns, content)
    return picture


def diff_snapshots(before: Snapshot, after: Snapshot) -> list[str]:
    changes = [f"created outside the cache: {k}" for k in sorted(after.keys() - before.keys())]
    changes += [f"removed outside the cache: {k}" for k in sorted(before.keys() - after.keys())]
    changes += [
        f"changed outside the cache: {k}"
        for k in sorted(before.keys() & after.keys())
        if before[k] != after[k]
    ]
    return changes
