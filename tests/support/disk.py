"""A small, real filesystem for disk-full tests: a tmpfs mounted over one folder in a mount
namespace of the process under test only (`unshare`, with a user namespace so that no root
is needed). Writes past its size get a real ENOSPC; the mount goes away with the process."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path


def on_tmpfs(folder: Path, size_kb: int) -> list[str]:
    """The command prefix that runs a command with a `size_kb` tmpfs mounted on `folder`."""
    unshare = shutil.which("unshare")
    assert unshare is not None, "unshare (util-linux) is needed for the disk-full tests"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    script = 'mount -t tmpfs -o "size=$1k,mode=0700" tmpfs "$2" && shift 2 && exec "$@"'
    return [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh",
            str(size_kb), str(folder)]  # fmt: skip


def seen_by(pid: int, path: Path) -> Path:
    """`path` as the process `pid` sees it (inside its mount namespace)."""
    return Path(f"/proc/{pid}/root") / path.relative_to(path.anchor)


def files_in(root: Path) -> list[str]:
    """Every file under `root`, relative (folders left out)."""
    return sorted(
        str(Path(base, name).relative_to(root))
        for base, _, names in os.walk(root)
        for name in names
    )


def fill(folder: Path) -> Path:
    """Write into `folder` until its filesystem is full; the file that filled it."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler
