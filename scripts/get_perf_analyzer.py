"""Provision perf_analyzer (2.48, the last release whose tritonclient wheel ships it)
into a cache folder, with the libraries it needs, and print the path of a wrapper
script that runs it.

    python scripts/get_perf_analyzer.py            # prints .../perf_analyzer (a wrapper)
    $(python scripts/get_perf_analyzer.py) -m simple -u localhost:8001 -i grpc

Where from: the manylinux ``tritonclient==2.48.0`` wheel carries
``bin/perf_analyzer``; it links ``libcudart.so.12`` (the ``nvidia-cuda-runtime-cu12``
wheel; no GPU needed) and ``libb64.so.0d`` (Debian's ``libb64-0d``, unpacked, not
installed). Everything lands in ``$TRITONPY_CACHE`` (default
``~/.cache/tritonpy``)/perf_analyzer and is reused. x86_64 Linux only.
"""

from __future__ import annotations

import glob
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PA_VERSION = "2.48.0"
CUDART_VERSION = "12.5.82"


def cache_dir() -> Path:
    root = Path(os.environ.get("TRITONPY_CACHE", Path.home() / ".cache" / "tritonpy"))
    return root / "perf_analyzer"


def _pip_download(spec: str, dest: Path, *extra: str) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            str(dest),
            *extra,
            spec,
        ],
        check=True,
        timeout=600,
    )
    name = spec.split("==")[0].replace("-", "_")
    found = glob.glob(str(dest / f"{name}-*.whl"))
    if not found:
        raise RuntimeError(f"pip downloaded no wheel for {spec}")
    return Path(found[0])


def _extract(wheel: Path, suffix: str, target: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        member = next((n for n in zf.namelist() if n.endswith(suffix)), None)
        if member is None:
            raise RuntimeError(f"{wheel.name} holds no {suffix}")
        with zf.open(member) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)


def _libb64(lib: Path, work: Path) -> None:
    if subprocess.run(["sh", "-c", "ldconfig -p | grep -q 'libb64\\.so\\.0d'"]).returncode == 0:
        return  # installed system-wide already
    download = ["apt-get", "download", "libb64-0d"]
    if subprocess.run(download, cwd=work, capture_output=True, timeout=300).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)
        subprocess.run(download, cwd=work, check=True, capture_output=True, timeout=300)
    deb = next(work.glob("libb64-0d_*.deb"))
    unpacked = work / "deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True, timeout=120)
    so = next(unpacked.rglob("libb64.so.0d*"))
    shutil.copy2(so.resolve(), lib / "libb64.so.0d")


def provision() -> Path:
    """The wrapper script that runs perf_analyzer; builds the cache on first use."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        raise RuntimeError("perf_analyzer binaries exist for x86_64 Linux only")
    root = cache_dir()
    wrapper = root / "perf_analyzer"
    if wrapper.exists():
        return wrapper
    bin_dir, lib = root / "bin", root / "lib"
    bin_dir.mkdir(parents=True, exist_ok=True)
    lib.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wheel = _pip_download(
            f"tritonclient=={PA_VERSION}", work, "--platform", "manylinux1_x86_64", "--python-version", "3.10"
        )
        _extract(wheel, "bin/perf_analyzer", bin_dir / "perf_analyzer")
        (bin_dir / "perf_analyzer").chmod(0o755)
        cudart = _pip_download(f"nvidia-cuda-runtime-cu12=={CUDART_VERSION}", work)
        _extract(cudart, "lib/libcudart.so.12", lib / "libcudart.so.12")
        _libb64(lib, work)
    wrapper.write_text(
        "#!/bin/sh\n"
        'here="$(cd "$(dirname "$0")" && pwd)"\n'
        'export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\n'
        'exec "$here/bin/perf_analyzer" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


if __name__ == "__main__":
    print(provision())
