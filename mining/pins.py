"""One set on every CPU: each numeric library's SIMD dispatch pinned to x86-64-v3 before it loads.

OpenCV, numpy, OpenBLAS, faiss, torch (ATen, oneDNN, MKL) and numba pick their kernels from the
CPU they run on, and some kernels round differently: OpenCV's AVX-512 SIFT gives other RootSIFT
descriptors than its AVX2 SIFT on the same photo, numpy's AVX-512 maths functions are other
approximations. A set built on an AVX-512 node would then differ from one built on an AVX2 node.
`pin()` sets each library's own switch to x86-64-v3 (AVX2, FMA, F16C: every x86-64 CPU since
2013-2015) in this process's environment, so that every library loaded afterwards, here and in
every process started from here (Dask workers, SLURM jobs), runs the same kernels on any CPU at
that level or above. `mining/__init__.py` calls it, so importing anything of mining pins first.

`check()` verifies that the libraries a stage loaded really run at that level (a library loaded
before mining was imported escapes the pin) and that this CPU has it; otherwise it stops with one
line. ONNX Runtime has no switch: its bytes on both levels are checked by the test suite instead
(tests/workflow/test_any_cpu.py, under QEMU's Haswell model). `MINING_SIMD=native` turns the pin off (the
libraries' own choice; recorded in every provenance, for speed experiments only).

docs/reproducibility.md says what is pinned, why and what it costs.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shlex
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from mining.errors import UserError

LEVEL = "x86-64-v3"
NATIVE = "native"
ENV_SWITCH = "MINING_SIMD"

# Each library's switch: (variable, value, how): "add" joins our names to the user's list (a user
# may disable more, never less), "set" replaces the value, "default" sets it where it is unset.
_PINS: tuple[tuple[str, str, str], ...] = (
    # OpenCV's dispatched code above AVX2: the names this CPU has (_OPENCV_ABOVE; OpenCV warns
    # on stderr about disabling what the CPU lacks)
    ("OPENCV_CPU_DISABLE", "", "add"),
    # OpenCV's bundled Intel IPP dispatches on its own (AVX-512 "k0" here, another build on an
    # AVX2 CPU, measured: other RootSIFTs even with OPENCV_IPP=sse42); off, OpenCV's own code runs
    ("OPENCV_IPP", "disabled", "set"),
    ("OPENCV_LOG_LEVEL", "ERROR", "default"),  # not OpenCV's warning that IPP is off (a user's level stays)
    ("NPY_DISABLE_CPU_FEATURES", "X86_V4 AVX512_ICL AVX512_SPR", "add"),  # numpy 2.x's groups above v3
    ("OPENBLAS_CORETYPE", "Haswell", "set"),     # numpy's, scipy's and faiss's OpenBLAS
    ("FAISS_OPT_LEVEL", "avx2", "set"),          # faiss-cpu's extension build
    ("ATEN_CPU_CAPABILITY", "avx2", "set"),      # torch's own kernels
    ("ONEDNN_MAX_CPU_ISA", "AVX2", "set"),       # torch's convolutions
    ("MKL_CBWR", "AVX2", "set"),                 # torch's BLAS: MKL's reproducible mode at AVX2
    ("NUMBA_CPU_NAME", "haswell", "set"),        # numba's compiled kernels
)
VARIABLES = frozenset(var for var, _, _ in _PINS)
_SKX = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")
_OPENCV_ABOVE = {  # OpenCV's name (as cv2.getCPUFeaturesLine() prints it) -> the CPU flags it needs
    "AVX512-SKX": _SKX,
    "AVX512-CLX": _SKX + ("avx512_vnni",),
    "AVX512-CNL": _SKX + ("avx512ifma", "avx512vbmi"),
    "AVX512-ICL": _SKX + ("avx512ifma", "avx512vbmi", "avx512_vbmi2", "avx512_bitalg", "avx512_vpopcntdq",
                          "avx512_vnni"),
    "AVX_VNNI": ("avx_vnni",),
}
_SEPARATOR = {"OPENCV_CPU_DISABLE": ",", "NPY_DISABLE_CPU_FEATURES": " "}
# what x86-64-v3 needs of the CPU (the flags /proc/cpuinfo names)
_NEEDS = ("avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "movbe")


def pinned() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() != NATIVE


def pin() -> None:
    """Set every library's dispatch switch in os.environ (before the library loads); nothing
    with MINING_SIMD=native."""
    if not pinned():
        return
    for var, value, how in _PINS:
        if how == "set":
            os.environ[var] = value
            continue
        if how == "default":
            os.environ.setdefault(var, value)
            continue
        sep = _SEPARATOR[var]
        if var == "OPENCV_CPU_DISABLE":
            flags = cpu_flags()
            value = sep.join(name for name, needs in _OPENCV_ABOVE.items() if flags.issuperset(needs))
        have = [v for v in os.environ.get(var, "").replace(",", " ").split() if v]
        os.environ[var] = sep.join(have + [v for v in value.split(sep) if v not in have])


def cpu_flags() -> set[str]:
    """The CPU's feature flags (/proc/cpuinfo; empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), for provenance."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def problems() -> list[str]:
    """What keeps this process from computing at the pinned level: a CPU below it, or a loaded
    library that runs above or below it. Empty when everything is at the level (or unpinned)."""
    if not pinned():
        return []
    found = []
    flags = cpu_flags()
    missing = [f for f in _NEEDS if flags and f not in flags]
    if missing:
        found.append(f"this CPU lacks {', '.join(missing)} ({LEVEL} needs them)")
    found += [f"{var} is {os.environ.get(var)!r}, not {value!r}" for var, value, how in _PINS
              if how == "set" and os.environ.get(var) != value]
    cv2 = sys.modules.get("cv2")
    if cv2 is not None:
        line = cv2.getCPUFeaturesLine().split()
        on = {f.lstrip("*") for f in line if not f.endswith("?")}
        above = sorted(f for f in on if f.startswith("AVX512") or f == "AVX_VNNI")
        if above:
            found.append(f"OpenCV was loaded before mining pinned it and runs {', '.join(above)}")
        if cv2.ipp.useIPP():
            found.append("OpenCV runs Intel IPP (OPENCV_IPP was not 'disabled' when it loaded)")
        if "AVX2" not in on:
            found.append("OpenCV does not run AVX2 here (OPENCV_CPU_DISABLE or the CPU)")
    npcore = sys.modules.get("numpy._core._multiarray_umath")
    if npcore is not None:
        features = getattr(npcore, "__cpu_features__", {})
        if features.get("X86_V4") or features.get("AVX512_ICL") or features.get("AVX512_SPR"):
            found.append("numpy was loaded before mining pinned it and runs AVX-512")
        if features and not features.get("X86_V3"):
            found.append("numpy does not run x86-64-v3 here (NPY_DISABLE_CPU_FEATURES or the CPU)")
    return found


def check(who: str = "") -> None:
    """Stop with one line when this process would compute at another level than the pinned one
    (`who`: the place, for a message that does not go through the CLI's own prefix)."""
    found = problems()
    if found:
        raise UserError(f"{who + ': ' if who else ''}not at the pinned SIMD level {LEVEL}, so the bytes would "
                        f"differ from a build "
                        f"elsewhere: {'; '.join(found)}. Run mining as its own command (import mining before "
                        f"numpy or cv2), on a CPU with AVX2 and FMA; {ENV_SWITCH}=native builds anyway, "
                        "recorded as another set")


def provenance() -> dict[str, str | None]:
    """What the card and the report record: `fingerprint()` and the CPU that computed."""
    return {**fingerprint(), "cpu": cpu_model()}


# ---- the locked library versions ----------------------------------------------------------
LOCK_FILE = "requirements.lock"


def lock_path() -> Path | None:
    """The repository's requirements.lock beside the package (None when installed without it)."""
    path = Path(__file__).resolve().parent.parent / LOCK_FILE
    return path if path.is_file() else None


@lru_cache(maxsize=1)
def locked() -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """(sha256 of requirements.lock, ((name, version), ...) pinned in it); (None, ()) without one."""
    path = lock_path()
    if path is None:
        return None, ()
    data = path.read_bytes()
    pins = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", data.decode("utf-8", "replace"), re.M)
    return hashlib.sha256(data).hexdigest(), tuple(pins)


@lru_cache(maxsize=1)
def lock_differences() -> tuple[str, ...]:
    """`name installed X, locked Y` for each locked package installed at another version (or not at all)."""
    found = []
    for name, version in locked()[1]:
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = None
        if have != version:
            found.append(f"{name} {'installed ' + have if have else 'not installed'}, locked {version}")
    return tuple(found)


def fingerprint() -> dict[str, str | None]:
    """What a computed file's bytes depend on besides its inputs, the same on every machine that
    gives the same bytes: the lock's digest, whether this environment is the locked one, the
    pinned SIMD level. (The CPU's model is `provenance()`'s, for the card and the report.)"""
    digest, _ = locked()
    diffs = lock_differences() if digest else ()
    state = "none (installed without requirements.lock)" if digest is None else (
        "matches" if not diffs else f"differs: {'; '.join(diffs[:5])}" + (f"; +{len(diffs) - 5}" if len(diffs) > 5 else ""))
    return {"lock_sha256": digest, "environment": state, "simd": LEVEL if pinned() else NATIVE}


def warn_unlocked(who: str) -> None:
    """One line on stderr when the installed libraries are not the locked ones (the set may differ)."""
    diffs = lock_differences() if locked()[0] else ()
    if diffs:
        print(f"{who}: warning: the installed libraries are not requirements.lock's ({'; '.join(diffs[:3])}"
              f"{'; …' if len(diffs) > 3 else ''}): the result may differ from a locked build's; "
              "`make setup` installs the lock", file=sys.stderr)


def exports() -> list[str]:
    """`export VAR=value` for every pin, for a process mining does not start itself (a Dask worker
    of one's own scheduler, a SLURM job script; docs/reproducibility.md)."""
    return [f"export {var}={shlex.quote(os.environ[var])}" for var, _, _ in _PINS if pinned() and var in os.environ]

