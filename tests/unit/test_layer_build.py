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
