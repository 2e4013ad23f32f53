"""The kernels' on-disk cache: per user, keyed by what changes the compiled code.

numba's own ``cache=True`` writes next to the sources (``__pycache__``), which
fails on read-only installs, and keys its entries by signature, CPU and
bytecode only: processes running with another threading layer or
``NUMBA_OPT`` share entries, and concurrent writers adding different
signatures of one function can pair an index entry with another signature's
machine code (the next process to load it crashes). So the kernels get a
cache object of their own (:func:`attach`, on each dispatcher; numba's global
configuration and the user's own ``cache=True`` functions are left alone):

* **Where**: ``ACES_FAST_NUMBA_CACHE_DIR`` if set, else ``$NUMBA_CACHE_DIR/aces_fast``
  if numba's cache directory is set, else the platform's per-user cache
  directory (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux,
  ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows) +
  ``aces_fast/numba``. ``ACES_FAST_NUMBA_CACHE=0`` turns the cache off.
* **Keyed**: one subdirectory per combination of aces_fast, numba,
  llvmlite/LLVM and Python versions, CPU name and features, threading layer, every numba setting
  that alters code generation (``NUMBA_OPT``, vectorizer switches, bounds
  checking, debug info, SVML, ...) and the kernels' source text
  and ``aces_fast/_semantics.py`` (:func:`settings`). Processes with different settings
  never share files.
* **Safe for concurrent processes**: a data file's name is derived from its
  index key, so writers of different entries never touch the same file;
  files are written to a temporary name and renamed (atomic); the index is
  updated under an exclusive file lock (no lost entries).
* **One process per entry**: a kernel's callees are compiled with it, never
  loaded from their own entries, since numba names compiled code per process
  and an entry mixing two processes' code can crash the next one to load it.
* **Not everything caches**: numba refuses code that embeds run-time
  addresses (kernels built with ``NUMBA_OPT=0`` do); such kernels are compiled
  in each process, silently.
* **Counted alike cold and warm**: :data:`log` records every kernel signature
  made ready, compiled or loaded. Compiling a kernel compiles the helper
  kernels it calls (each a signature of its own), while loading it loads one
  entry that holds their code; so each entry also stores the helper
  signatures compiled into it, and a load counts them as loaded.
  :func:`aces_fast.warmup` thus reports the same total cold and warm.
* **Corruption-proof**: each data file starts with a SHA-256 of its index key
  and payload, checked before unpickling; an unreadable index or data file is
  a cache miss (the kernel is compiled again and the entry rewritten), never a
  crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import os
import platform
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from ... import _env
from ..._env import flag

ENV = _env.NUMBA_CACHE
DIR_ENV = _env.NUMBA_CACHE_DIR
#: numba settings (``numba.core.config`` names) that change the generated code
_CODEGEN_SETTINGS = (
    "OPT",
    "LOOP_VECTORIZE",
    "SLP_VECTORIZE",
    "ENABLE_AVX",
    "CPU_NAME",
    "CPU_FEATURES",
    "BOUNDSCHECK",
    "DEBUGINFO_DEFAULT",
    "EXTEND_VARIABLE_LIFETIMES",
    "USING_SVML",
    "DISABLE_INTEL_SVML",
    "LLVM_REFPRUNE_PASS",
    "LLVM_REFPRUNE_FLAGS",
    "NRT_STATS",
    "DEBUG_NRT",
    "DEBUG_ARRAY_OPT",
    "DEBUG_ARRAY_OPT_RUNTIME",
    "ENABLE_PROFILING",
    "USE_RVSDG_FRONTEND",
    "PARFOR_MAX_TUPLE_SIZE",
    "CAPTURED_ERRORS",
    "FULL_TRACEBACKS",
    "THREADING_LAYER",
    "THREADING_LAYER_PRIORITY",
)
_MAGIC = b"aces_fast numba cache 2\n"

#: the keyed directory in use (``None``: caching off); see :func:`status`
directory: str | None = None
#: why the cache is off, when it is
reason: str | None = None
Signature = tuple[str, str]
#: ``(kernel, signature, "compiled" | "loaded")`` for every kernel signature this
#: process made ready, helpers compiled into a loaded entry included, in order
log: list[tuple[str, str, str]] = []
#: one list per compilation under way (numba compiles a kernel's callees inside
#: its own compilation): the helper signatures made ready inside it
_frames: list[list[Signature]] = []


def _note_lookup(py_func: Any, sig: Any, found: bool, helpers: Any = ()) -> None:
    """A kernel signature was looked up in the cache (numba's first step of every
    compile): a hit is loaded, with the ``helpers`` stored in its entry; a miss
    is compiled next, until :func:`_note_saved`."""
    entry = (py_func.__qualname__, str(sig))
    inside = [entry] + [tuple(h) for h in helpers]
    log.extend((*x, "loaded" if found else "compiled") for x in inside)
    if _frames:  # a callee of a kernel being compiled: part of that kernel
        _frames[-1].extend(inside)
    if not found:
        _frames.append([])


def _note_saved() -> list[Signature]:
    """numba offers every compiled signature to the cache once compiled: the helper
    signatures compiled (or loaded) into it, which its entry stores."""
    helpers = _frames.pop() if _frames else []
    if _frames:
        _frames[-1].extend(helpers)
    return helpers


def reset_frames() -> None:
    """Forget unfinished compilations (one that raised is never offered)."""
    _frames.clear()


def enabled() -> bool:
    """Whether ``ACES_FAST_NUMBA_CACHE`` leaves the cache on (the default); a value
    that is no switch word raises ``ValueError`` (:func:`aces_fast._env.flag`)."""
    return flag(ENV, True)


def root() -> str:
    """The per-user directory holding the keyed cache directories (see the module doc)."""
    explicit = os.environ.get(DIR_ENV, "").strip()
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    numba_dir = os.environ.get("NUMBA_CACHE_DIR", "").strip()
    if numba_dir:
        return os.path.join(os.path.abspath(os.path.expanduser(numba_dir)), "aces_fast")
    home = os.path.expanduser("~")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
        return os.path.join(base, "aces_fast", "Cache", "numba")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Caches", "aces_fast", "numba")
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(home, ".cache")
    return os.path.join(base, "aces_fast", "numba")


def _layer_loads(name: str) -> bool:
    """Whether numba's threading layer ``name`` would load here (imports its
    library, starts no thread)."""
    try:
        if name == "tbb":
            from numba.np.ufunc import parallel

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                parallel._check_tbb_version_compatible()
            importlib.import_module("numba.np.ufunc.tbbpool")  # compiled, untyped
        elif name == "omp":
            importlib.import_module("numba.np.ufunc.omppool")
        return name in ("tbb", "omp", "workqueue")
    except Exception:  # ImportError, OSError, a future numba's own
        return False


def threading_layer() -> str:
    """The threading layer numba runs (or will run) parallel kernels on.

    Once a parallel kernel ran, numba's choice; before, the choice numba's
    rule will make (``NUMBA_THREADING_LAYER`` and its priority list over the
    layers that load here), found without starting the thread pool.
    """
    import numba
    from numba.core import config

    try:
        return str(numba.threading_layer())
    except ValueError:  # no parallel kernel has run yet
        pass
    requested = str(config.THREADING_LAYER).lower()
    priority = [str(x) for x in config.THREADING_LAYER_PRIORITY]
    linux = sys.platform.startswith("linux")
    candidates = {
        "default": priority,
        "safe": ["tbb"],
        "threadsafe": ["tbb", "omp"],
        "forksafe": ["tbb"] + ([] if linux else ["omp"]) + ["workqueue"],
    }.get(requested, [requested])
    for name in candidates:
        if _layer_loads(name):
            return name
    return f"none ({requested})"


def _sources_digest() -> str:
    """SHA-256 of the compiled code's source text: this package's ``.py`` files and
    ``aces_fast/_semantics.py``, which :mod:`.semantics` compiles."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.path.join(here, name) for name in sorted(os.listdir(here)) if name.endswith(".py")]
    paths.append(os.path.join(os.path.dirname(os.path.dirname(here)), "_semantics.py"))
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as fh:
            digest.update(fh.read())
    return digest.hexdigest()


def settings() -> dict[str, Any]:
    """Everything the keyed directory name depends on."""
    import llvmlite
    import llvmlite.binding as ll
    import numba
    from numba.core import config

    try:
        features = ll.get_host_cpu_features().flatten()
    except Exception:  # not every host reports its features
        features = ""
    from ... import __version__

    out: dict[str, Any] = {
        "aces_fast": __version__,
        "numba": numba.__version__,
        "llvmlite": llvmlite.__version__,
        "llvm": tuple(ll.llvm_version_info),
        "python": sys.version,
        "cache_tag": sys.implementation.cache_tag,
        "abiflags": getattr(sys, "abiflags", ""),
        "platform": sys.platform,
        "machine": platform.machine(),
        "cpu": ll.get_host_cpu_name(),
        "cpu_features": features,
        "threading_layer": threading_layer(),
        "sources": _sources_digest(),
    }
    for name in _CODEGEN_SETTINGS:
        out[f"config.{name}"] = repr(getattr(config, name, None))
    return out


def _key_directory(values: dict[str, Any]) -> str:
    import numba

    digest = hashlib.sha256(repr(sorted(values.items())).encode()).hexdigest()[:20]
    machine = platform.machine().lower() or "cpu"
    return f"numba{numba.__version__}-{sys.implementation.cache_tag}-{machine}-{digest}"


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive advisory lock on file ``path`` between processes (best effort:
    without a lock the worst case is a lost index entry, i.e. a recompile)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        except ImportError:  # Windows
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _make_classes():
    """numba's cache classes with this module's locator, naming, lock and checks."""
    from numba.core import caching

    class Locator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
        """Every kernel in the keyed directory (numba's locators are never asked)."""

        def __init__(self, py_func, py_file):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = directory

        def get_cache_path(self):
            return self._cache_path

        def ensure_cache_path(self):
            os.makedirs(self._cache_path, mode=0o700, exist_ok=True)
            if not os.access(self._cache_path, os.W_OK):
                raise OSError(f"{self._cache_path} is not writable")

    class Impl(caching.CompileResultCacheImpl):
        def __init__(self, py_func):
            # numba's own __init__ would consult NUMBA_CACHE_LOCATOR_CLASSES
            self._lineno = py_func.__code__.co_firstlineno
            source = inspect.getfile(py_func)
            locator = Locator.from_function(py_func, source)
            if locator is None:
                raise OSError(f"cannot cache {py_func.__qualname__} in {directory}")
            self._locator = locator
            module = os.path.splitext(os.path.basename(source))[0]
            self._filename_base = self.get_filename_base(
                f"{module}.{py_func.__qualname__}", getattr(sys, "abiflags", "")
            )

        def check_cachable(self, cres):
            # numba's own check, without its warning per function: code that
            # embeds addresses (e.g. built with NUMBA_OPT=0) is simply compiled
            # in each process, and one warning per kernel would be noise
            return not (
                any(not x.can_cache for x in cres.lifted) or cres.library.has_dynamic_globals
            )

    class IndexFile(caching.IndexDataCacheFile):
        """Data files named by their key and checksummed; index updates locked."""

        def _data_name_for(self, key) -> str:
            return f"{self._index_name[:-4]}.{_digest(key)[:24]}.nbc"

        #: the helper signatures of the entry being saved / last loaded (always
        #: replaced, never appended to: the empty default is shared)
        helpers: Sequence[Signature] = ()

        def save(self, key, data):
            name = self._data_name_for(key)
            self._save_data(name, (key, (data, self.helpers)))
            with _locked(os.path.join(self._cache_path, ".lock")):
                overloads = self._load_index()
                if overloads.get(key) != name:
                    overloads[key] = name
                    self._save_index(overloads)

        def load(self, key):
            self.helpers = []
            try:
                name = self._load_index().get(key)
                stored = None if name is None else self._load_data(name, key)
                data, helpers = stored
                self.helpers = [(str(a), str(b)) for a, b in helpers]
                return data
            except Exception:  # any unreadable entry is a miss
                return None

        def _load_index(self):
            try:
                overloads = super()._load_index()
            except Exception:  # corrupt index: start over
                return {}
            return overloads if isinstance(overloads, dict) else {}

        def _save_data(self, name, keyed):
            key, data = keyed
            body = self._dump(data)
            check = hashlib.sha256(_digest(key).encode() + body).digest()
            with self._open_for_write(self._data_path(name)) as fh:
                fh.write(_MAGIC + check + body)

        def _load_data(self, name, key=None):
            import pickle

            with open(self._data_path(name), "rb") as fh:
                raw = fh.read()
            head = len(_MAGIC)
            body = raw[head + 32 :]
            if (
                raw[:head] != _MAGIC
                or key is None
                or raw[head : head + 32] != hashlib.sha256(_digest(key).encode() + body).digest()
            ):
                return None  # truncated, damaged or another entry's file
            return pickle.loads(body)

    class DiskCache(caching.FunctionCache):
        _impl_class = Impl

        def __init__(self, py_func):
            super().__init__(py_func)
            self._cache_file = IndexFile(
                cache_path=self._cache_path,
                filename_base=self._impl.filename_base,
                source_stamp=self._impl.locator.get_source_stamp(),
            )

        def load_overload(self, sig, target_context):
            data = None
            # Inside another kernel's compilation (a callee): compiled too, not
            # loaded. A kernel compiled around a callee loaded from an entry that
            # another process wrote stores code whose internal names (numba
            # numbers them per process) clash once loaded: the next process to
            # load it crashed (numba issues 4807, 8578; here ACES-O, then
            # surrogate_loo_auc twice).
            if not _frames:
                try:
                    data = super().load_overload(sig, target_context)
                except Exception:  # a payload that does not rebuild: compile
                    data = None
            _note_lookup(
                self._py_func,
                sig,
                data is not None,
                self._cache_file.helpers if data is not None else (),
            )
            return data

        def save_overload(self, sig, data):
            self._cache_file.helpers = _note_saved()
            try:
                super().save_overload(sig, data)
            except OSError:  # a full disk or a vanished directory: the code still runs
                pass

    return DiskCache


def _make_counting_null_cache():
    """numba's no-op cache that still counts (:data:`log`) when caching is off."""
    from numba.core import caching

    class CountingNullCache(caching.NullCache):
        def __init__(self, py_func):
            self._py_func = py_func

        def load_overload(self, sig, target_context):
            _note_lookup(self._py_func, sig, False)
            return None

        def save_overload(self, sig, data):
            _note_saved()

    return CountingNullCache


def _digest(key: Any) -> str:
    """A stable text digest of a numba index key (signature, CPU, bytecode hashes)."""
    return hashlib.sha256(str(key).encode()).hexdigest()


_DiskCache: Any = None


def configure() -> None:
    """Decide (once, when the kernels are imported) whether and where to cache."""
    global directory, reason, _DiskCache
    try:
        on = enabled()
    except ValueError as exc:  # no cache is slower, never wrong: say so, go on
        reason = f"off: {exc}"
        warnings.warn(
            f"aces_fast: the numba kernels' disk cache is {reason}", RuntimeWarning, stacklevel=2
        )
        return
    if not on:
        reason = f"off ({ENV}={os.environ.get(ENV)})"
        return
    try:
        path = os.path.join(root(), _key_directory(settings()))
        os.makedirs(path, mode=0o700, exist_ok=True)
        if not os.access(path, os.W_OK):
            raise OSError(f"{path} is not writable")
        _DiskCache = _make_classes()
    except Exception as exc:  # no cache is slower, never wrong
        reason = f"off: {exc} (set {DIR_ENV} to a writable directory)"
        warnings.warn(
            f"aces_fast: the numba kernels' disk cache is {reason}", RuntimeWarning, stacklevel=2
        )
        return
    directory = path


def attach(dispatcher: Any) -> None:
    """Give a kernel's dispatcher the disk cache (when :func:`configure` enabled it)."""
    if not hasattr(dispatcher, "_cache"):
        return  # NUMBA_DISABLE_JIT (a plain function)
    try:
        dispatcher._cache = _DiskCache(dispatcher.py_func)
    except Exception:  # this kernel compiles every time instead
        dispatcher._cache = _make_counting_null_cache()(dispatcher.py_func)


def status() -> str:
    """The cache directory, or why there is none (for ``show_config``)."""
    return directory if directory is not None else (reason or "off")
