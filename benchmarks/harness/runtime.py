"""The process the benchmarks run in: backends, warm-up, thread pinning, and the
facts a report records (machine, versions, import time).

Only the public API of aces_fast is used, except in :func:`_backend` (how to get
a backend object) and :func:`_pin_cpp_threads` (the cpp backend's thread count),
which isolate the two internals the harness needs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _backend(name: str) -> Any:
    """The backend object ``name`` (raises the library's BackendUnavailableError)."""
    import aces_fast

    get = getattr(aces_fast, "get_backend", None)
    if get is None:  # older layouts export it from the backends package only
        get = importlib.import_module("aces_fast.backends").get_backend
    return get(name)


def backend_unavailable_reason(name: str) -> str | None:
    """``None`` when backend ``name`` loads here, else the library's reason."""
    import aces_fast

    try:
        _backend(name)
    except aces_fast.BackendUnavailableError as exc:
        return str(getattr(exc, "reason", exc))
    return None


def device_unavailable_reason(device: str) -> str | None:
    """``None`` when torch can put tensors on ``device`` here (``cpu`` always),
    else why not: torch missing, built without CUDA, or no CUDA device visible."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    import torch

    if torch.device(device).type != "cuda":
        return None
    if not torch.cuda.is_available():
        built = (
            f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        )
        return f"no CUDA device is available (torch {torch.__version__}, {built})"
    return None


def device_info(device: str = "cuda") -> dict[str, Any]:
    """The GPU of a device run (name, memory, CUDA and driver facts), or the reason
    there is none."""
    reason = device_unavailable_reason(device)
    if reason is not None:
        return {"device": device, "unavailable": reason}
    import torch

    props = torch.cuda.get_device_properties(torch.device(device))
    return {
        "device": device,
        "name": props.name,
        "memory_gb": round(props.total_memory / 1e9, 1),
        "capability": f"{props.major}.{props.minor}",
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
    }


def default_backend() -> str:
    """The backend ``auto`` picks for a NumPy input (what a user gets)."""
    import aces_fast

    return str(aces_fast.aces_c(np.array([[1, 0], [0, 1]], dtype=np.uint8)).backend)


def load_runtimes(impls: Sequence[str]) -> dict[str, Any]:
    """Import what the implementations use and JIT-compile numba; return warm-up facts.

    Must run before :func:`thread_limit` so threadpoolctl sees every OpenMP and
    BLAS library, and before any timing so no import or JIT cost is measured.
    """
    facts: dict[str, Any] = {}
    for name in impls:
        if name in ("cpp", "numba", "torch", "numpy") and backend_unavailable_reason(name) is None:
            backend = _backend(name)
            if name == "numba":
                t0 = time.perf_counter()
                backend.warmup()
                facts["numba_warmup_s"] = round(time.perf_counter() - t0, 2)
    for impl, module in (("torch-autograd", "torch"), ("numpy-rankdata", "scipy.stats")):
        if impl in impls:
            with contextlib.suppress(ImportError):
                importlib.import_module(module)
    if "torch-cuda" in impls and device_unavailable_reason("cuda") is None:
        import torch

        # the CUDA context and the allocator's first pool: seconds, never timed
        t0 = time.perf_counter()
        torch.zeros(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        facts["cuda_init_s"] = round(time.perf_counter() - t0, 2)
    return facts


def _pin_cpp_threads(stack: contextlib.ExitStack, n: int) -> bool:
    """Set the cpp backend's OpenMP thread count to ``n`` until ``stack`` closes."""
    if backend_unavailable_reason("cpp") is not None:
        return False
    cpp = _backend("cpp")
    old = getattr(cpp, "n_threads", None)
    if old is None:
        return False
    cpp.n_threads = n
    stack.callback(setattr, cpp, "n_threads", old)
    return True


@contextlib.contextmanager
def thread_limit(n: int) -> Iterator[dict[str, Any]]:
    """Pin every threaded library in this process to ``n`` threads, then restore.

    threadpoolctl (if installed) limits the loaded BLAS and OpenMP runtimes;
    torch, numba and the cpp backend are set directly. ``OMP_NUM_THREADS`` and
    friends are set for libraries loaded later. Yields a dict saying what was
    pinned.
    """
    if n < 1:
        raise ValueError(f"threads must be >= 1; got {n}")
    how: dict[str, Any] = {"threads": n}
    with contextlib.ExitStack() as stack:
        env_keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
        saved_env = {k: os.environ.get(k) for k in env_keys}

        def restore_env() -> None:
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

        stack.callback(restore_env)
        for k in env_keys:
            os.environ[k] = str(n)
        try:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(limits=n))
            how["threadpoolctl"] = True
        except ImportError:
            how["threadpoolctl"] = False
        torch = sys.modules.get("torch")
        if torch is not None:
            old = torch.get_num_threads()
            torch.set_num_threads(n)
            stack.callback(torch.set_num_threads, old)
            how["torch"] = n
        numba = sys.modules.get("numba")
        if numba is not None:
            old_nb = numba.get_num_threads()
            nb = min(n, numba.config.NUMBA_NUM_THREADS)
            numba.set_num_threads(nb)
            stack.callback(numba.set_num_threads, old_nb)
            how["numba"] = nb
        if _pin_cpp_threads(stack, n):
            how["cpp"] = n
        yield how


# ---------------------------------------------------------------------------
# facts for the report


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    return fields


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_list(text: str) -> set[int]:
    """The CPUs of a sysfs list such as ``"0-3,8,10-11"``."""
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if lo:
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpu_topology(cpus: Sequence[int] | None = None, sysfs: str = "/sys/devices/system") -> dict:
    """How the usable CPUs sit on the hardware, from Linux's sysfs.

    A lent "16-core" host may be eight cores with two hardware threads each, or
    span two sockets or NUMA nodes; a scaling ratio means something different
    in each case, so the many-core measurements print this with their tables.

    Parameters
    ----------
    cpus : sequence of int, optional
        The CPUs to describe (default: those this process may run on).
    sysfs : str
        The sysfs root (a test passes a made-up tree).

    Returns
    -------
    dict
        ``cpus`` (count), ``cores`` (distinct physical cores among them),
        ``sockets``, ``numa_nodes`` (nodes holding any of them) and ``l3``
        (the first CPU's last-level cache size as sysfs writes it, e.g.
        ``"49152K"``); a field is ``None`` where sysfs does not say.
    """
    if cpus is None:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    root = Path(sysfs)
    cores: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    known = True
    for c in cpus:
        topo = root / "cpu" / f"cpu{c}" / "topology"
        package = _read(topo / "physical_package_id")
        # the CPU's siblings on its core name the core across packages
        siblings = _read(topo / "core_cpus_list") or _read(topo / "thread_siblings_list")
        if package is None or siblings is None:
            known = False
            break
        sockets.add(package)
        cores.add((package, siblings))
    nodes = 0
    for node in sorted(root.glob("node/node[0-9]*")):
        listed = _read(node / "cpulist")
        if listed and cpu_list(listed) & set(cpus):
            nodes += 1
    l3 = _read(root / "cpu" / f"cpu{cpus[0]}" / "cache" / "index3" / "size") if cpus else None
    return {
        "cpus": len(cpus),
        "cores": len(cores) if known and cpus else None,
        "sockets": len(sockets) if known and cpus else None,
        "numa_nodes": nodes or None,
        "l3": l3,
    }


def topology_line(topo: dict) -> str:
    """:func:`cpu_topology` in words, e.g. ``"16 CPUs on 8 cores (2 threads a
    core), 1 socket, 1 NUMA node, L3 49152K"``."""
    words = [f"{topo['cpus']} CPUs"]
    if topo["cores"]:
        share = topo["cpus"] / topo["cores"]
        words[0] += f" on {topo['cores']} cores"
        words[0] += f" ({share:g} threads a core)" if share > 1 else " (one thread a core)"
        words.append(f"{topo['sockets']} socket{'s' * (topo['sockets'] != 1)}")
    if topo["numa_nodes"]:
        words.append(f"{topo['numa_nodes']} NUMA node{'s' * (topo['numa_nodes'] != 1)}")
    if topo["l3"]:
        words.append(f"L3 {topo['l3']}")
    return ", ".join(words)


def machine_info() -> dict[str, Any]:
    """CPU model (from /proc/cpuinfo; with its family and model numbers, which a
    virtual machine's bare "AMD EPYC" leaves out), cores, memory, load, platform."""
    from .cells import _available_memory

    info = _cpuinfo()
    cpu = info.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in info and "model" in info:
        cpu += f" (family {info['cpu family']}, model {info['model']})"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu,
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "topology": cpu_topology(),
        "memory_available_gb": round(_available_memory() / 1e9, 1),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
    }


def host_line() -> str:
    """The host of a printed measurement, in one line: CPU, usable cores (and
    how they sit: :func:`topology_line`) and the cpp kernels' SIMD level.
    Rates from different sessions' machines differ by more than any change
    measured on one (an AVX2 EPYC ran the 200x500 ACES-C batch at 0.36-0.6x
    an AVX-512 Xeon's rate), so every table says which it came from."""
    m = machine_info()
    try:
        from aces_fast import _core

        simd = _core.simd_level()
    except ImportError:
        simd = "none (no compiled extension)"
    cap = os.environ.get("ACES_FAST_SIMD")
    return (
        f"host: {m['cpu']}; usable: {topology_line(m['topology'])}; cpp kernels at SIMD level "
        f"{simd}{f' (ACES_FAST_SIMD={cap})' if cap else ''}"
    )


def versions() -> dict[str, Any]:
    """Versions of aces_fast, Python and every library the benchmark touches."""
    import aces_fast

    out: dict[str, Any] = {
        "aces_fast": aces_fast.__version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
    }
    # from the distributions' metadata: importing torch only for its version costs seconds
    for dist in ("scipy", "numba", "torch", "pytest-benchmark", "matplotlib", "threadpoolctl"):
        try:
            out[dist.replace("-", "_")] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist.replace("-", "_")] = None
    reason = backend_unavailable_reason("cpp")
    out["cpp_backend"] = _backend("cpp").info() if reason is None else f"unavailable: {reason}"
    out["default_backend"] = default_backend()
    return out


def thread_libraries() -> list[dict[str, Any]]:
    """The BLAS / OpenMP runtimes threadpoolctl sees in this process."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [
        {k: lib.get(k) for k in ("user_api", "internal_api", "prefix", "version")}
        for lib in threadpool_info()
    ]


def measure_import_time(repeats: int = 5, cwd: str | None = None) -> dict[str, float]:
    """Seconds to ``import aces_fast`` in fresh interpreters (best of ``repeats``).

    ``importtime_s``: the package's cumulative time from ``python -X importtime``;
    ``numpy_s``: the part of that run spent importing numpy; ``wall_s``: wall time
    of ``python -c "import aces_fast"`` minus ``python -c pass``.
    """
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)

    def wall(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            check=True,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return time.perf_counter() - t0

    runs: list[tuple[float, float]] = []  # (aces_fast cumulative, numpy cumulative)
    walls: list[tuple[float, float]] = []  # (import aces_fast, pass)
    for _ in range(repeats):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import aces_fast"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            cwd=cwd,
        )
        found: dict[str, float] = {}
        for line in proc.stderr.splitlines():
            match = re.match(r"import time:\s*\d+\s*\|\s*(\d+)\s*\|\s*(\S+)\s*$", line)
            if match and match.group(2).strip() in ("aces_fast", "numpy"):
                found[match.group(2)] = int(match.group(1)) * 1e-6
        if "aces_fast" in found:
            runs.append((found["aces_fast"], found.get("numpy", 0.0)))
        walls.append((wall("import aces_fast"), wall("pass")))
    best = min(runs) if runs else (float("nan"), float("nan"))
    wall_s = min(w[0] for w in walls) - min(w[1] for w in walls)
    return {"importtime_s": best[0], "numpy_s": best[1], "wall_s": max(0.0, wall_s)}


class SetAside:
    """Output directories of timed runs, moved aside instead of deleted until the
    measuring is over (:meth:`clear`, or the ``with`` block's end).

    On ext4 without a journal (this project's 2-core machine), a new file skips
    every inode deleted in the last minute (five while its inode block is
    dirty), checking each: right after the last run's thousand part files were
    deleted, creating an empty file took 190-470 us of CPU there, against 33 us
    seven minutes after the last deletion, and a 10^6-problem
    ``rerank-dataset`` at two threads ran at 80 000-88 000 tasks/s instead of
    89 000-95 000. A renamed directory frees no inode. The outputs kept take
    disk space (about 1.2 GB per 10^6 problems of 100x50) until then.
    """

    def __init__(self, root: Any) -> None:
        self.trash = Path(root) / "_set_aside"
        self._count = 0

    def __call__(self, path: Any) -> None:
        """Move ``path`` (if it exists) out of the way of the next run."""
        path = Path(path)
        if not path.exists():
            return
        self.trash.mkdir(parents=True, exist_ok=True)
        while True:
            target = self.trash / f"{self._count:04d}-{path.name}"
            self._count += 1
            if not target.exists():
                break
        path.rename(target)

    def clear(self) -> None:
        """Delete what was set aside (after the last timed run)."""
        shutil.rmtree(self.trash, ignore_errors=True)

    def __enter__(self) -> SetAside:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()
