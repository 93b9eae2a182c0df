"""The core layer ships compiled bytecode (issue 13, item 1): `sam build` runs
layers/core/Makefile, whose code step copies the engram package and compiles it to unchecked-hash
.pyc files, which Python then uses on a read-only /opt without looking at the sources' times.
(The dependency step downloads wheels, so it is not run here; bench/cold_start.py runs it all.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_layer_code_is_compiled_to_unchecked_hash_pyc(tmp_path):
    env = {**os.environ, "ARTIFACTS_DIR": str(tmp_path), "PYTHON": sys.executable}
    subprocess.run(["make", "-s", "-C", str(ROOT / "layers" / "core"), "layer-code"], env=env, check=True)
    layer = tmp_path / "python"
    sources = [p for p in (layer / "engram").rglob("*.py")]
    compiled = list((layer / "engram").rglob("*.pyc"))
    assert sources and len(compiled) == len(sources)
    assert (layer / "engram" / "console" / "static" / "index.html").is_file()  # the console ships too
    for pyc in compiled[:20]:
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 0b01, pyc  # hash-based (bit 0) and unchecked (bit 1 clear)
    # Imported from there with bytecode writing off (as on /opt), the shipped .pyc is what runs:
    # a source changed after the build is not even looked at (no timestamp or hash check).
    settings = layer / "engram" / "kernel" / "settings.py"
    settings.write_text(settings.read_text() + "\nCHANGED_AFTER_THE_BUILD = True\n")
    probe = "import engram.kernel.settings as s; print(hasattr(s, 'CHANGED_AFTER_THE_BUILD'))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PYTHONPATH": str(layer), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "False"


def _pyenv_version(makefile_dir: Path, bin_dir: Path) -> str:
    """PYENV_VERSION as a Makefile exports it to its recipes, with `bin_dir` first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYENV_VERSION", "PYTHON")}
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    show = 'show-pyenv-version: ; @echo "[$$PYENV_VERSION]"'
    out = subprocess.run(
        ["make", "-s", "-C", str(makefile_dir), f"--eval={show}", "show-pyenv-version"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_both_makefiles_find_pyenvs_python_3_13_without_a_global_version(tmp_path):
    # sam build runs the layer's Makefile on its own: on a pyenv machine whose global version is
    # not 3.13, python3.13 (the shim) works only with a 3.13 version named, as the top one names it.
    pyenv = tmp_path / "pyenv"
    pyenv.write_text("#!/bin/sh\nprintf '2.7.18\\n3.11.7\\n3.13.0\\n3.13.10\\n3.13.2\\n3.14.0\\n'\n")
    pyenv.chmod(0o755)
    for makefile_dir in (ROOT / "layers" / "core", ROOT):
        assert _pyenv_version(makefile_dir, tmp_path) == "[3.13.10]"
    pyenv.unlink()  # no pyenv: nothing named, python3.13 is whatever PATH has
    assert _pyenv_version(ROOT / "layers" / "core", tmp_path) == "[]"
