"""The numba kernels' per-user disk cache and the public warm-up.

Most tests run child processes against a cache directory of their own
(``ACES_FAST_NUMBA_CACHE_DIR``): several warming up at once with different
numba settings, later ones loading what they wrote, a read-only install, a
damaged cache. A child reports a digest of its results and how many kernel
signatures it compiled and loaded, so "loads from the cache" and "gives the
same results" are checked, not assumed.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba", reason="numba is not installed")

import aces_fast as af
from aces_fast.backends.numba import _cache

# A child: the LOO-AUC and surrogate kernels (serial and parallel builds, the
# parallel surrogate being where a shared cache used to crash), and a method;
# with "light", the serial LOO-AUC kernels only.
CHILD = textwrap.dedent(r"""
    import hashlib, json, sys
    import numpy as np
    import numba
    import aces_fast as af
    from aces_fast.backends import numba as nb

    rng = np.random.default_rng(0)
    B = (rng.random((40, 30)) < 0.5).astype(np.uint8)
    w = rng.random(30)
    out = []
    if "light" in sys.argv:  # one kernel family, serial: the cheapest real compile
        out.append(nb.NumbaBackend(parallel_min_work=1 << 62).loo_auc(B, None, 1e-9))
    else:
        for min_work in (1 << 62, 0):
            be = nb.NumbaBackend(parallel_min_work=min_work)
            out.append(be.loo_auc(B, None, 1e-9))
            L, J, g = be.surrogate(B, w, 10.0)
            out += [L, np.array([J]), g]
        out.append(af.aces_c(B, backend="numba").scores)
    if "warmup" in sys.argv:
        out.append(np.array([af.warmup("numba", progress=False)["loaded"] >= 0]))
    compiled, loaded = nb._compile_counts()
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel ran ("light")
        layer = None
    print(json.dumps({
        "digest": hashlib.sha256(b"".join(a.tobytes() for a in out)).hexdigest(),
        "compiled": compiled, "loaded": loaded, "cache": nb._kernels._cache.status(),
        "layer": layer, "file": af.__file__,
        "ready": sorted({(k, sig): how for k, sig, how in nb._kernels._cache.log}.items()),
    }))
""")


def _env(cache_dir, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "ACES_FAST_"))}
    env.update(
        ACES_FAST_NUMBA_CACHE_DIR=str(cache_dir), NUMBA_NUM_THREADS="2", PYTHONUNBUFFERED="1"
    )
    env.update(extra)
    return env


def _start(cache_dir, *args, cwd=None, **extra) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        env=_env(cache_dir, **extra),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, f"child died with {proc.returncode}:\n{err[-3000:]}"
    return dict(json.loads(out.strip().splitlines()[-1]), stderr=err)


def _run(cache_dir, *args, **extra) -> dict:
    return _finish(_start(cache_dir, *args, **extra))


WORKQUEUE = {"NUMBA_THREADING_LAYER": "workqueue"}


def test_concurrent_warmups_with_different_settings_then_cached_loads(tmp_path):
    # two processes with the same settings write one fresh cache at once (the
    # same index and data files: two writers make the race), and one with
    # another threading layer shares the root directory meanwhile. (A third
    # writer added about a quarter to the 3-4 minutes this test took on the
    # project's 2-core machine, each child compiling for some 100 s of CPU.)
    procs = [_start(tmp_path) for _ in range(2)] + [_start(tmp_path, **WORKQUEUE)]
    first = [_finish(p) for p in procs]
    assert first[2]["layer"] == "workqueue"
    # the layer changes how threads are run, never the results
    assert len({r["digest"] for r in first}) == 1, first
    assert first[0]["cache"] == first[1]["cache"]
    assert first[2]["cache"] != first[0]["cache"]  # a keyed directory per setting
    assert {Path(r["cache"]).parent for r in first} == {tmp_path}
    assert all(r["compiled"] > 0 for r in first)
    # later processes load every kernel they use, compile none, and compute the same bits
    for extra, cache in (({}, first[0]["cache"]), (WORKQUEUE, first[2]["cache"])):
        again = _run(tmp_path, **extra)
        assert again["compiled"] == 0 and again["loaded"] > 0, again
        assert again["digest"] == first[0]["digest"] and again["cache"] == cache


SETTINGS = {"default": {}, "workqueue": WORKQUEUE, "opt0": {"NUMBA_OPT": "0"}}


@pytest.mark.slow
def test_concurrent_full_warmups(tmp_path):
    # two full warm-ups per setting at once; NUMBA_OPT=0 compiles without the
    # reassociated sums, so its bits may differ from the optimized builds'
    procs = {
        (name, k): _start(tmp_path, "warmup", **extra)
        for name, extra in SETTINGS.items()
        for k in range(2)
    }
    first = {key: _finish(p) for key, p in procs.items()}
    for name in SETTINGS:
        assert first[(name, 0)]["digest"] == first[(name, 1)]["digest"]
        assert first[(name, 0)]["cache"] == first[(name, 1)]["cache"]
    assert first[("default", 0)]["digest"] == first[("workqueue", 0)]["digest"]
    assert len({first[(name, 0)]["cache"] for name in SETTINGS}) == len(SETTINGS)
    for name, extra in SETTINGS.items():
        again = _run(tmp_path, "warmup", **extra)
        assert again["digest"] == first[(name, 0)]["digest"]
        assert again["loaded"] > 0, (name, again)
        # unoptimized code embeds addresses: numba does not cache some of those kernels
        assert again["compiled"] == 0 or name == "opt0", (name, again)
        assert "NumbaWarning" not in again["stderr"]


def _tree(root: Path) -> dict:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
    }


def test_read_only_install(tmp_path):
    site = tmp_path / "site"
    package = Path(af.__file__).parent
    shutil.copytree(
        package, site / "aces_fast", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    for p in [site, *site.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    before = _tree(site)
    cache = tmp_path / "cache"
    try:
        r = _run(
            cache, "light", cwd=str(tmp_path), PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1"
        )
        again = _run(
            cache, "light", cwd=str(tmp_path), PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1"
        )
    finally:
        for p in [site, *site.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    assert r["file"].startswith(str(site))
    assert _tree(site) == before  # nothing written next to the sources
    assert Path(r["cache"]).parent == cache and list(Path(r["cache"]).glob("*.nbc"))
    assert again["compiled"] == 0 and again["digest"] == r["digest"]


def test_damaged_cache_is_recompiled_not_crashed(tmp_path):
    # the light child: its 13 entries are damaged as the full one's would be, at
    # a fifth of the compile time
    r = _run(tmp_path, "light")
    keyed = Path(r["cache"])
    data = sorted(keyed.glob("*.nbc"))
    index = sorted(keyed.glob("*.nbi"))
    assert len(data) >= 6 and index
    rng = np.random.default_rng(3)
    # truncated data, flipped bytes, another entry's (valid) file, garbage index
    data[0].write_bytes(data[0].read_bytes()[:100])
    raw = bytearray(data[1].read_bytes())
    for pos in rng.integers(64, len(raw), size=20):
        raw[pos] ^= 0xFF
    data[1].write_bytes(bytes(raw))
    data[2].write_bytes(data[3].read_bytes())
    index[0].write_bytes(rng.bytes(300))
    for f in data[4:]:
        f.write_bytes(b"")
    damaged = _run(tmp_path, "light")
    assert damaged["digest"] == r["digest"] and damaged["compiled"] > 0
    repaired = _run(tmp_path, "light")  # the damaged entries were rewritten
    assert repaired["digest"] == r["digest"] and repaired["compiled"] == 0


def test_cache_off(tmp_path):
    r = _run(tmp_path, "light", ACES_FAST_NUMBA_CACHE="0")
    assert r["cache"].startswith("off") and r["loaded"] == 0
    assert not list(tmp_path.iterdir())


def test_a_misspelt_switch_warns_and_leaves_the_cache_off(tmp_path):
    r = _run(tmp_path, "light", ACES_FAST_NUMBA_CACHE="of")
    assert r["cache"].startswith("off: ACES_FAST_NUMBA_CACHE='of' is not a switch")
    assert r["loaded"] == 0 and not list(tmp_path.iterdir())
    assert r["stderr"].count("disk cache is off") == 1


def test_unwritable_cache_directory_warns_and_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would go")
    r = _run(blocker / "cache", "light")
    assert r["cache"].startswith("off") and r["loaded"] == 0
    assert r["stderr"].count("disk cache is off") == 1  # one warning, not one per kernel


def test_failing_cache_writes_leave_the_kernel_running(monkeypatch, tmp_path):
    # a full disk or a directory removed under a running server: compiled in memory
    from aces_fast.backends.numba._jit import _jit  # configures the cache

    if _cache._DiskCache is None:
        pytest.skip(f"the disk cache is {_cache.status()} in this environment")
    monkeypatch.setattr(_cache, "directory", str(tmp_path))

    def add_one(x):
        return x + 1

    kernel = _jit()(add_one)
    assert isinstance(kernel._cache, _cache._DiskCache)

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(kernel._cache._cache_file), "_open_for_write", no_space)
    assert kernel(41) == 42
    assert sum(kernel.stats.cache_misses.values()) == 1  # compiled, not loaded
    assert not list(tmp_path.glob("*.nbc")) and not list(tmp_path.glob("*.nbi"))


def test_cache_location(monkeypatch, tmp_path):
    for var in (_cache.DIR_ENV, "NUMBA_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if sys.platform.startswith("linux"):
        assert _cache.root() == str(tmp_path / "home" / ".cache" / "aces_fast" / "numba")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert _cache.root() == str(tmp_path / "xdg" / "aces_fast" / "numba")
        monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec
        assert _cache.root() == str(tmp_path / "home" / ".cache" / "aces_fast" / "numba")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "nb"))
    assert _cache.root() == str(tmp_path / "nb" / "aces_fast")
    monkeypatch.setenv(_cache.DIR_ENV, str(tmp_path / "mine"))
    assert _cache.root() == str(tmp_path / "mine")
    for value, on in (("0", False), ("off", False), ("1", True), ("", True)):
        monkeypatch.setenv(_cache.ENV, value)
        assert _cache.enabled() is on


def test_keyed_directory_follows_codegen_settings(monkeypatch):
    from numba.core import config

    base = _cache.settings()
    key = _cache._key_directory(base)
    assert key == _cache._key_directory(_cache.settings())  # stable
    monkeypatch.setattr(config, "OPT", 0)
    assert _cache._key_directory(_cache.settings()) != key
    monkeypatch.undo()
    assert (
        _cache._key_directory(
            dict(
                base,
                threading_layer="workqueue" if base["threading_layer"] != "workqueue" else "omp",
            )
        )
        != key
    )
    assert _cache._key_directory(dict(base, numba="0.0.0")) != key
    assert _cache._key_directory(dict(base, sources="0")) != key


# ---------------------------------------------------------------------------
# the public warm-up


def test_warmup_is_public_and_a_noop_where_nothing_compiles():
    assert "warmup" in af.__all__ and af.warmup is af.config.__globals__["warmup"]
    for name in ("cpp", "numpy"):
        try:
            facts = af.warmup(name)
        except af.BackendUnavailableError:
            continue
        assert facts["backend"] == name and set(facts) == {"backend", "seconds"}


def test_warmup_numba_reports_and_shows_progress(capsys):
    facts = af.warmup("numba", progress=True)
    assert facts["backend"] == "numba" and {"compiled", "loaded", "cache"} <= set(facts)
    assert any("surrogate" in label for label in facts["steps"])
    assert all(t >= 0 for t in facts["steps"].values())
    err = capsys.readouterr().err
    assert "aces_fast warmup (numba): [0/" in err and "surrogate" in err
    again = af.warmup("numba", progress=False)
    assert again["compiled"] == 0 and again["loaded"] == 0  # nothing left to do
    assert capsys.readouterr().err == ""


# The order that crashed: ACES-O caches the surrogate's evaluation kernel as a
# callee of its own; a process that then compiled surrogate_loo_auc around that
# loaded callee stored an entry that killed the next process to load it.
ORDER = textwrap.dedent(r"""
    import sys
    import numpy as np
    import aces_fast as af

    B = (np.random.default_rng(0).random((30, 12)) < 0.5).astype(np.uint8)
    if sys.argv[1] == "aces-o":
        print(af.rerank(B, "aces-o", backend="numba").order.tolist())
    else:
        values, objective, gradient = af.surrogate_loo_auc(B, np.full(12, 1 / 12), 10.0,
                                                           backend="numba")
        print(values.tolist(), objective, gradient.tolist())
""")


def test_a_kernel_compiled_around_a_cached_callee_loads_later(tmp_path):
    def run(what: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-c", ORDER, what],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
        return proc.stdout

    run("aces-o")
    compiled = run("surrogate")  # its callee loaded from the first run's entry
    assert run("surrogate") == compiled  # loaded from its own entry
    assert run("surrogate") == compiled


def test_cold_and_warm_runs_count_the_same_signatures(tmp_path):
    """A compile makes the helper kernels ready too; a load of the cached entry
    counts them as loaded, so cold and warm runs list the same signatures."""
    cold = _run(tmp_path, "light")
    warm = _run(tmp_path, "light")
    assert cold["ready"] and {how for _, how in cold["ready"]} == {"compiled"}
    assert {how for _, how in warm["ready"]} == {"loaded"}
    assert [key for key, _ in warm["ready"]] == [key for key, _ in cold["ready"]]
    assert len(cold["ready"]) > warm["loaded"]  # helpers counted inside the loaded entries


@pytest.mark.slow
def test_warmup_counts_the_same_total_cold_and_warm(tmp_path):
    """The audit saw "71 compiled" cold but "18 loaded" warm for the same work."""

    def warmup() -> dict:
        proc = subprocess.run(
            [sys.executable, "-m", "aces_fast", "warmup", "--backend", "numba", "--json"],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)[0]

    cold, warm = warmup(), warmup()
    assert cold["compiled"] > 0 and cold["loaded"] == 0, cold
    assert warm["compiled"] == 0 and warm["loaded"] == cold["compiled"], (cold, warm)


def test_warmup_cli():
    proc = subprocess.run(
        [sys.executable, "-m", "aces_fast", "warmup", "--backend", "numba", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    facts = json.loads(proc.stdout)
    assert facts[0]["backend"] == "numba" and "compiled" in facts[0]
    assert proc.stderr == ""  # --json: no progress
    bad = subprocess.run(
        [sys.executable, "-m", "aces_fast", "warmup", "--backend", "nope"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 1 and bad.stderr.startswith("aces-fast: error: unknown backend")
