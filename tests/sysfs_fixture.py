"""The 8-GPU / 8-NIC sysfs fixture node, generated on first use by make_node8.py into a temp
directory keyed by the generator's content. It is not checked in: like real sysfs it contains
symlink loops, and setuptools follows links when it walks a project for `pip install`."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

MAKER = Path(__file__).resolve().parent / "fixtures" / "sysfs" / "make_node8.py"


def node8() -> Path:
    digest = hashlib.sha1(MAKER.read_bytes()).hexdigest()[:12]
    out = Path(tempfile.gettempdir()) / f"railscope-node8-{digest}"
    if (out / "podresources.json").exists():
        return out
    spec = importlib.util.spec_from_file_location("make_node8", MAKER)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    build = Path(tempfile.mkdtemp(prefix="railscope-node8-build-"))
    mod.main(build / "node8")
    with contextlib.suppress(OSError):  # another process finished first
        os.replace(build / "node8", out)  # atomic: a concurrent run sees the whole tree or none
    shutil.rmtree(build, ignore_errors=True)
    return out
