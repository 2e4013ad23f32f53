"""The ``aces-fast`` command line (also ``python -m aces_fast``).

Subcommands:

* ``evaluate [DATASET ...]`` -- every ranking method on labelled data: Pass@1/2/5
  over all and over mixed problems, time per method, test diagnostics.
  ``DATASET`` is a bundled name (``humaneval-codegen16b``, the default, or
  ``humaneval-gpt35``), ``all`` (both bundled datasets) or a ``.npz`` /
  ``.jsonl`` path.
* ``rerank FILE`` -- rank the candidates of one pass matrix (npy, npz, csv,
  jsonl; ``-`` reads standard input) and show scores and test weights.
* ``convert IN OUT.parquet`` -- a dataset (npz, jsonl, bundled name) to the Parquet
  layout of :mod:`aces_fast.parquet`.
* ``rerank-dataset IN.parquet -o OUT.parquet`` -- rank every problem of a Parquet
  dataset, streaming, locally or on Ray (:mod:`aces_fast.stream`).
* ``bench`` -- the benchmark suite of a source checkout (``benchmarks/``, not
  installed with the package).
* ``config`` -- versions and available backends.
* ``warmup`` -- compile (or load from the disk cache) the numba kernels now,
  so that no later command pays it.

Errors in the input (bad files, unknown names, unavailable backends) print one
line ``aces-fast: error: ...`` to stderr and exit with status 1 -- never a
traceback. A file that makes a loader fail in an unforeseen way, running out of
memory, or a bug in the library is reported the same way, with the exception's
type, message and innermost source line; ``ACES_FAST_TRACEBACK=1`` re-raises
such unexpected exceptions so the full traceback is printed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import re
import sys
import time
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from . import _env
from ._env import flag as env_flag
from .backends import BackendUnavailableError

PROG = "aces-fast"


# ---------------------------------------------------------------------------
# argument helpers


def _int_at_least(minimum: int, what: str) -> Any:
    """An argparse ``type`` accepting integers >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = minimum - 1
        if v < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return v

    return parse


_positive_int = _int_at_least(1, "a positive integer")


def _batch_size(text: str) -> int | str:
    """``--batch-size``: a positive integer or ``auto`` (spelled as
    :func:`aces_fast._engine.check_batch_size` takes it)."""
    from ._engine import check_batch_size

    try:
        return check_batch_size(text)  # "auto"; any other text is refused
    except ValueError:
        pass
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or 'auto', got {text!r}"
        ) from None


#: the value of a hyperparameter flag the user did not give
_UNSET = object()


def _hyperparameter_flags() -> list[Any]:
    """``(flag, dest, family, Param)`` of every tunable hyperparameter, from the
    declarations of :mod:`aces_fast._registry`: ``--<family>-<name>``."""
    from . import _registry

    out = []
    for family, params in _registry.tunable_families().items():
        for p in params:
            flag = f"--{family}-{p.name.replace('_', '-')}"
            out.append((flag, flag[2:].replace("-", "_"), family, p))
    return out


def _limit(text: str) -> int:
    from ._safe_read import parse_limit

    try:
        return parse_limit(text, "the limit")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_limits(parser: argparse.ArgumentParser) -> None:
    from ._safe_read import DEFAULT_MAX_BYTES, DEFAULT_MAX_CELLS, ENV_MAX_BYTES, ENV_MAX_CELLS

    g = parser.add_argument_group("file size limits (checked before allocating)")
    g.add_argument(
        "--max-cells",
        type=_limit,
        metavar="N",
        help=f"most cells (n x m) of one pass matrix (default ${ENV_MAX_CELLS}, "
        f"else {DEFAULT_MAX_CELLS:,})",
    )
    g.add_argument(
        "--max-bytes",
        type=_limit,
        metavar="N",
        help=f"most bytes of data in one file after decompression (default "
        f"${ENV_MAX_BYTES}, else {DEFAULT_MAX_BYTES:,})",
    )


def _plot_formats() -> dict[str, str]:
    from matplotlib.backend_bases import FigureCanvasBase

    return FigureCanvasBase.get_supported_filetypes()


def _check_output(path: str, flag: str, *, plot: bool = False, directory: bool = False) -> None:
    """Refuse now, before any long run, an output that would fail once the work is
    done: a folder that cannot be made or written, a directory where a file goes
    (or the reverse), or (``plot``) a file extension matplotlib cannot write.

    Missing folders are fine: every output option creates them (with their
    parents, :func:`_make_parents`) when it writes, so a run that fails before
    leaves none behind. Only the nearest existing ancestor must be a writable
    directory. ``directory``: the output itself is a directory.
    """
    p = Path(path)
    if plot:
        formats = _plot_formats()
        ext = p.suffix.lower().lstrip(".")
        if ext not in formats:
            what = "has no file extension" if not ext else f"'.{ext}' is not an image format"
            raise ValueError(
                f"{flag} {path}: {what}; matplotlib writes "
                f"{', '.join('.' + f for f in sorted(formats))} (e.g. .png)"
            )
    if directory and p.exists() and not p.is_dir():
        raise ValueError(f"{flag} {path}: exists and is not a directory")
    if not directory and p.is_dir():
        raise ValueError(f"{flag} {path}: is a directory; expected a file name")
    folder = p if directory else p.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"{flag} {path}: {folder} is not a directory")
    target = p if p.exists() else folder
    if not os.access(target, os.W_OK | (os.X_OK if target.is_dir() else 0)):
        raise ValueError(f"{flag} {path}: {target} is not writable")


class _LoadFailure(Exception):
    """A loader failed with an exception it does not document (see :func:`_loading`)."""

    def __init__(self, what: str, exc: BaseException):
        super().__init__(what)
        self.what, self.exc = what, exc


@contextmanager
def _loading(what: str) -> Iterator[None]:
    """Loading ``what`` (a file or dataset name): the loaders' own ValueError/TypeError
    pass unchanged; running out of memory or an OS error become a ValueError naming
    ``what``; anything else is a bug, reported by main() with where it happened."""
    try:
        yield
    except (ValueError, TypeError, BackendUnavailableError):
        raise
    except MemoryError:
        raise ValueError(
            f"{what}: out of memory while loading it (--max-cells / --max-bytes "
            "refuse files beyond a size before allocating)"
        ) from None
    except OSError as exc:
        raise ValueError(f"{what}: cannot read: {exc.strerror or exc}") from None
    except Exception as exc:
        raise _LoadFailure(what, exc) from exc


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    parts = f.filename.replace(os.sep, "/").split("/")
    short = "/".join(parts[parts.index("aces_fast") :]) if "aces_fast" in parts else parts[-1]
    return f" (in {f.name}, {short}:{f.lineno})"


def _unexpected(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (
        f"{type(exc).__name__}{': ' + text if text else ''}{_where(exc)}; this is a bug in "
        "aces_fast, please report it (ACES_FAST_TRACEBACK=1 prints the traceback)"
    )


def _add_hyperparameters(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "method hyperparameters (default: the library's, i.e. the paper's)"
    )
    for flag, dest, family, p in _hyperparameter_flags():
        default = "all" if p.default is None else p.default
        g.add_argument(
            flag,
            dest=dest,
            type=p.check.parse,
            metavar=p.metavar,
            default=_UNSET,
            help=f"{family}: {p.help} (default {default})",
        )


def _set_flags(args: argparse.Namespace) -> list[Any]:
    """``(flag, family, Param, value)`` of every hyperparameter flag the user gave,
    its value checked by the parameter's validator under the flag's name (so an
    error says ``--aces-o-lr must be >= 0``, not the Python argument's name)."""
    out = []
    for flag, dest, family, p in _hyperparameter_flags():
        value = getattr(args, dest, _UNSET)
        if value is not _UNSET:
            out.append((flag, family, p, p.check(value, flag)))
    return out


def _overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Hyperparameters the user set, by method family (for ``evaluate``'s ``params``)."""
    out: dict[str, dict[str, Any]] = {}
    for _, family, p, value in _set_flags(args):
        out.setdefault(family, {})[p.name] = value
    return out


def _warn_ignored(args: argparse.Namespace, families: Sequence[str], why: str) -> None:
    """Warn about the hyperparameter flags of method families that will not run;
    ``why`` may name the ``{family}``."""
    from . import _registry

    given = _set_flags(args)
    for family in dict.fromkeys(f for _, f, _, _ in given if f not in families):
        flags = [flag for flag, f, _, _ in given if f == family]
        members = [s.name for s in _registry.specs() if s.family == family]
        print(
            f"{PROG}: warning: {', '.join(flags)} ignored: {why.format(family=family)} "
            f"(these flags apply to {', '.join(members)})",
            file=sys.stderr,
        )


def _method_values(args: argparse.Namespace) -> dict[str, Any]:
    """The tunable hyperparameters of ``--method`` from the flags the user set
    (``rerank``, ``rerank-dataset``); flags of other method families are
    ignored with a warning."""
    from . import _registry

    overrides = _overrides(args)
    family = _registry.get(args.method).family
    _warn_ignored(args, [family], f"--method is {args.method}")
    return _registry.method_params(args.method, overrides.get(family), tunable=True)


def _method_list(text: str) -> list[str]:
    from .evaluation import ALL_METHODS

    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [t for t in names if t not in ALL_METHODS]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"unknown method(s) {', '.join(bad) or '(none given)'}; choose from "
            f"{', '.join(ALL_METHODS)}"
        )
    return names


def _method_name(text: str) -> str:
    """``--method``: names are case-insensitive, like backend names."""
    return text.strip().lower()


def _ks(text: str) -> list[int]:
    try:
        ks = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not ks or any(k < 1 for k in ks):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return ks


# ---------------------------------------------------------------------------
# progress


class _Progress:
    """tqdm bar when available, else a plain stderr counter; silent when disabled."""

    def __init__(self, total: int, desc: str, enabled: bool):
        self.total, self.desc, self.enabled = total, desc, enabled
        self.count = 0
        self._bar = None
        self._last = 0.0
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, desc=desc, unit="run", leave=False, file=sys.stderr)

    def __call__(self, method: str) -> None:
        self.count += 1
        if not self.enabled:
            return
        if self._bar is not None:
            if self._bar.postfix != method:
                self._bar.set_postfix_str(method, refresh=False)
            self._bar.update(1)
            return
        now = time.monotonic()
        if now - self._last > 0.2 or self.count == self.total:
            self._last = now
            print(
                f"\r{self.desc}: {self.count}/{self.total} ({method})".ljust(60),
                end="",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self.count:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# evaluate


def _dataset_names(items: Sequence[str]) -> list[str]:
    from .datasets import BUNDLED, DEFAULT_DATASET

    names: list[str] = []
    for item in items or [DEFAULT_DATASET]:
        names.extend(BUNDLED if item == "all" else [item])
    return names


def _plot(evaluations: list, path: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = len(evaluations)
    fig = Figure(figsize=(12, 3.6 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, 2, squeeze=False)
    for r, ev in enumerate(evaluations):
        for c, subset in enumerate(("all", "mixed")):
            ax = axes[r][c]
            summ = ev.summary(subset)
            width = 0.8 / len(ev.ks)
            for i, k in enumerate(ev.ks):
                vals = [100 * (summ[m][f"pass@{k}"] or 0.0) for m in ev.methods]
                ax.bar(
                    [x + (i - (len(ev.ks) - 1) / 2) * width for x in range(len(ev.methods))],
                    vals,
                    width,
                    label=f"Pass@{k}",
                )
            n = int(ev.labelled.sum() if subset == "all" else ev.mixed.sum())
            ax.set_title(f"{ev.dataset}: {subset} problems ({n})")
            ax.set_xticks(range(len(ev.methods)))
            ax.set_xticklabels(ev.methods, rotation=35, ha="right")
            ax.set_ylabel("Pass@k (%)")
            ax.set_ylim(0, 100)
            ax.grid(axis="y", alpha=0.3)
            if r == 0 and c == 0:
                ax.legend(loc="upper left")
    _make_parents(path)
    fig.savefig(path, dpi=120)


def _make_parents(path: Any) -> None:
    """Create the folders an output file goes in (the policy of :func:`_check_output`)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)


def _check_backend(choice: str | None) -> None:
    """Fail before any work on an unknown or unavailable backend; when the choice
    comes from ``ACES_FAST_BACKEND``, say so (the user may not know it is set)."""
    from .backends import ENV_VAR, resolve_backend

    if choice is not None:
        resolve_backend(choice)
        return
    env = os.environ.get(ENV_VAR)
    if env is None:
        return
    try:
        resolve_backend(env)
    except (ValueError, TypeError, BackendUnavailableError) as exc:
        raise ValueError(
            f"{exc} (the value {env!r} comes from the environment variable "
            f"{ENV_VAR}: unset it or pass --backend)"
        ) from None


def _check_labelled(datasets: Sequence[Any], names: Sequence[str]) -> None:
    """Pass@k needs labels: refuse, before running anything, a dataset without any
    (or without problems: a table of dashes would look like a result)."""
    for ds, name in zip(datasets, names):
        if not len(ds):
            raise ValueError(f"{name}: holds no problems; there is nothing to evaluate")
        if not any(p.labels is not None for p in ds):
            raise ValueError(
                f"{name}: none of its {len(ds)} problems has labels, and Pass@k needs them "
                "(which candidates are really correct); to rank candidates without labels "
                f"use '{PROG} rerank {name} --task ID' (one problem) or "
                f"'{PROG} convert' then '{PROG} rerank-dataset' (every problem)"
            )


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from . import _registry
    from .datasets import load_dataset
    from .evaluation import evaluate

    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError(
                "--plot needs matplotlib, which is not installed: "
                "pip install matplotlib (or aces_fast[plot])"
            ) from None
        _check_output(args.plot, "--plot", plot=True)
    methods = list(args.methods or _all_methods())
    params = _overrides(args)
    _warn_ignored(
        args,
        [_registry.get(m).family for m in methods if m in _registry.names()],
        "--methods has no {family} method",
    )
    _check_backend(args.backend)
    show = not args.quiet and sys.stderr.isatty()
    # Load everything first so a bad name fails before any long run.
    names = _dataset_names(args.datasets)
    datasets = []
    for name in names:
        with _loading(name):
            datasets.append(load_dataset(name, max_cells=args.max_cells, max_bytes=args.max_bytes))
    _check_labelled(datasets, names)
    results = []
    for ds in datasets:
        progress = _Progress(len(ds) * len(methods), ds.name, show)
        try:
            ev = evaluate(
                ds, methods, ks=args.ks, backend=args.backend, params=params, progress=progress
            )
        finally:
            progress.close()
        results.append(ev)
        if not args.json:
            print(ev.table() + ("\n" if len(results) < len(datasets) else ""), flush=True)
    if args.json:
        # one shape whatever the number of datasets
        print(json.dumps({"datasets": [ev.to_dict() for ev in results]}, indent=2, allow_nan=False))
    if args.plot is not None:
        _plot(results, args.plot)
        if not args.quiet:
            print(f"plot written to {args.plot}", file=sys.stderr)
    return 0


def _all_methods() -> Sequence[str]:
    from .evaluation import ALL_METHODS

    return ALL_METHODS


# ---------------------------------------------------------------------------
# rerank


def _nan_to_none(values: Any) -> Any:
    return [None if (isinstance(v, float) and math.isnan(v)) else v for v in values]


def _tolist(x: Any) -> Any:
    if x is None:
        return None
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu().numpy()
    return [float(v) for v in x]


def _cmd_rerank(args: argparse.Namespace) -> int:
    from .datasets import load_pass_matrix
    from .methods import rerank

    params = _method_values(args)  # a bad flag fails before the file is read
    _check_backend(args.backend)
    with _loading(args.file):
        prob = load_pass_matrix(
            args.file, task=args.task, max_cells=args.max_cells, max_bytes=args.max_bytes
        )
    res = rerank(prob.B, args.method, backend=args.backend, **params)
    scores = _tolist(res.scores)
    order = [int(i) for i in (res.order.tolist() if hasattr(res.order, "tolist") else res.order)]
    weights = _tolist(res.weights)
    loo = _tolist(res.loo_auc)
    labels = None if prob.labels is None else [int(v) for v in prob.labels]
    # --top trims the two lists, best first: candidates and non-zero test weights
    # (the per-candidate and per-test arrays of --json stay complete)
    top = len(order) if args.top is None else min(args.top, len(order))
    nz = (
        []
        if weights is None
        else sorted(
            (j for j in range(len(weights)) if weights[j] > 0), key=lambda j: (-weights[j], j)
        )
    )
    shown = nz if args.top is None else nz[: args.top]
    if args.json:
        out = {
            "file": str(args.file),
            "task_id": prob.task_id,
            "method": res.method,
            "backend": res.backend,
            "n": prob.n,
            "m": prob.m,
            "params": params,
            "ranking": [
                {
                    "rank": r + 1,
                    "candidate": i,
                    "score": scores[i],
                    **({"correct": labels[i]} if labels else {}),
                }
                for r, i in enumerate(order[:top])
            ],
            "tests": None
            if weights is None
            else [
                {
                    "test": j,
                    "weight": weights[j],
                    **({} if loo is None else {"loo_auc": _nan_to_none([loo[j]])[0]}),
                }
                for j in shown
            ],
            "order": order,
            "scores": scores,
            "weights": weights,
            "loo_auc": None if loo is None else _nan_to_none(loo),
            "fallback": bool(res.fallback),
        }
        if res.objective is not None:
            out["objective"] = _tolist(res.objective)
        print(json.dumps(out, indent=2, allow_nan=False))
        return 0
    hp = (" " + " ".join(f"{k}={v}" for k, v in params.items())) if params else ""
    print(
        f"{args.file} [{prob.task_id}]: n={prob.n} candidates, m={prob.m} tests; "
        f"method {res.method}{hp} (backend {res.backend})"
    )
    if res.fallback:
        print("no test judged informative: fell back to majority vote")
    if res.objective is not None and len(res.objective):
        print(f"objective J: {res.objective[0]:.6g} -> {res.objective[-1]:.6g}")
    print()
    head = f"{'rank':>5} {'candidate':>9} {'score':>12}" + ("  correct" if labels else "")
    print(head)
    for r, i in enumerate(order[:top]):
        line = f"{r + 1:5d} {i:9d} {scores[i]:12.6g}"
        if labels:
            line += f"  {'yes' if labels[i] else 'no':>7}"
        print(line)
    if top < len(order):
        print(f"  ... {len(order) - top} more (use --top)")
    if weights is None:
        print(f"\n{res.method} does not weight tests.")
        return 0
    print(f"\ntest weights: {len(nz)} of {len(weights)} tests non-zero, largest first")
    if nz:
        print(f"{'test':>5} {'weight':>10}" + (f" {'loo-auc':>8}" if loo is not None else ""))
        for j in shown:
            line = f"{j:5d} {weights[j]:10.4f}"
            if loo is not None:
                line += f" {loo[j]:8.4f}"
            print(line)
        if len(shown) < len(nz):
            print(f"  ... {len(nz) - len(shown)} more (use --top)")
    return 0


# ---------------------------------------------------------------------------
# convert and rerank-dataset (Parquet datasets; aces_fast.parquet / .stream / .ray)


def _cmd_convert(args: argparse.Namespace) -> int:
    from .datasets import load_dataset

    try:
        from .parquet import save_parquet
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    _arrow_without_pandas()
    if not args.output.lower().endswith(".parquet"):
        raise ValueError(
            f"OUT {args.output}: convert writes Parquet; name the file "
            "*.parquet (the loaders tell the format by that suffix)"
        )
    _check_output(args.output, "OUT")
    ds = load_dataset(args.input)
    _make_parents(args.output)
    dropped = save_parquet(
        ds, args.output, row_group_size=args.row_group_size, compression=args.compression
    )
    if not args.quiet:
        print(f"wrote {len(ds)} problems to {args.output}")
        if dropped:
            print(
                f"note: {', '.join(dropped)} are not columns of the Parquet layout and were "
                "not written",
                file=sys.stderr,
            )
    return 0


def _arrow_without_pandas() -> None:
    """Spare pyarrow's lazy pandas import in the dataset commands.

    The first time pyarrow converts a Python object it imports pandas (about
    1 s here) inside a Cython function that cannot raise: a Ctrl-C in that
    second was printed as "Exception ignored" and the run went on, or it left
    a half-imported module behind. These commands never hand pyarrow a pandas
    object, so its one look-up is made to find no pandas; an explicit
    ``to_pandas()`` still imports it on demand.
    """
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    class NoPandas:
        @staticmethod
        def find_spec(name: str, *args: Any) -> None:
            if name == "pandas":
                raise ImportError("pandas is not used by this command")

    sys.meta_path.insert(0, NoPandas)  # type: ignore[arg-type]
    try:
        pa.array([0])  # the look-up: an ImportError, remembered by pyarrow
    finally:
        sys.meta_path.remove(NoPandas)  # type: ignore[arg-type]


def _arrow_system_allocator() -> None:
    """Arrow buffers from the C library's allocator in a local dataset run, unless
    ``ARROW_DEFAULT_MEMORY_POOL`` chooses one.

    The command owns its process, so it may set the process-wide pool (the
    library's ``rerank_dataset`` leaves it to its caller). pyarrow's default,
    mimalloc, hands the reading and encoding buffers back to the system and
    maps them again, zeroing fresh huge pages: 300 000 problems of 100x50 at
    ``--threads 2`` on 2 cores, four runs each: system time 0.7 s against 1.2
    s, wall 3.1-4.0 s against 3.4-4.7 s, peak RSS 209 against 285 MB.
    """
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def _cmd_rerank_dataset(args: argparse.Namespace) -> int:
    try:
        from .parquet import InvalidRowError
        from .stream import default_errors_path, rerank_dataset
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    if args.engine == "local":  # Ray uses pandas with pyarrow: leave it be
        _arrow_without_pandas()
    params = _method_values(args)
    _check_backend(args.backend)
    if args.address is not None and args.engine != "ray":
        raise ValueError("--address needs --engine ray")
    # the Ray engine's own failures; "except ()" catches nothing (the local engine)
    ray_failure: tuple[type[BaseException], ...] = ()
    if args.engine == "ray":
        try:
            from .ray import RayEngineError
        except ImportError as exc:
            raise ValueError(str(exc)) from None
        ray_failure = (RayEngineError,)
    _check_output(args.output, "-o", directory=True)
    if args.errors is not None:
        _check_output(args.errors, "--errors")
    errors_path = args.errors or default_errors_path(args.output)
    if args.engine == "local":
        _arrow_system_allocator()
    try:
        summary = rerank_dataset(
            args.input,
            args.output,
            args.method,
            engine=args.engine,
            batch_size=args.batch_size,
            backend=args.backend,
            n_threads=args.threads,
            skip_invalid=args.skip_invalid,
            errors_path=errors_path,
            resume=args.resume,
            restart=args.restart,
            progress=False if args.quiet else None,
            address=args.address,
            **params,
        )
    except InvalidRowError as exc:
        raise ValueError(
            f"{exc} (--skip-invalid writes bad rows to {errors_path} and goes on)"
        ) from None
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    except ray_failure as exc:  # one line starting "Ray:", like any other error here
        raise ValueError(str(exc)) from None
    except KeyboardInterrupt:
        print(
            f"{PROG}: interrupted; the results in {args.output} are complete up to the last "
            "finished batch: rerun with --resume to finish",
            file=sys.stderr,
        )
        return 130
    if args.json:
        print(
            json.dumps(
                {
                    "output": str(summary.output),
                    "errors": None if summary.errors_path is None else str(summary.errors_path),
                    "rows": summary.rows,
                    "written": summary.written,
                    "resumed": summary.resumed,
                    "invalid": summary.invalid,
                    "seconds": summary.seconds,
                    "tasks_per_s": summary.tasks_per_s,
                    "engine": summary.engine,
                    "batch_size": summary.batch_size,
                    "timings": summary.timings,
                },
                indent=2,
            )
        )
    elif not args.quiet:
        print(
            f"{summary.written} problems ranked with {args.method} ({summary.engine} engine) "
            f"into {summary.output} in {summary.seconds:.2f} s "
            f"({summary.tasks_per_s:,.0f} tasks/s, batches of {summary.batch_size:,})"
            + (f"; {summary.resumed} already done" if summary.resumed else "")
            + (
                f"; {summary.invalid} invalid rows in {summary.errors_path}"
                if summary.invalid
                else ""
            )
        )
        if summary.timings:
            where = "time" if summary.engine == "local" else "time on the driver"
            print(f"{where}: " + ", ".join(f"{k} {v:.2f} s" for k, v in summary.timings.items()))
    return 0


def _add_dataset_commands(sub: Any) -> None:
    """The ``convert`` and ``rerank-dataset`` subcommands."""
    from . import _registry
    from ._engine import AUTO_BATCH_BYTES, AUTO_BATCH_ROWS
    from .datasets import BUNDLED
    from .stream import DEFAULT_BATCH_SIZE, ENGINES

    cv = sub.add_parser(
        "convert",
        help="convert a dataset (npz, jsonl, bundled name) to Parquet",
        description="Write a pass-matrix dataset in the Parquet layout (one row per problem, "
        "B bit-packed; docs/parquet.md). IN: a bundled name "
        f"({', '.join(BUNDLED)}), .npz, .jsonl, .jsonl.gz or .parquet. "
        "Needs pyarrow (pip install 'aces_fast[arrow]').",
    )
    cv.add_argument("input", metavar="IN")
    cv.add_argument("output", metavar="OUT.parquet")
    cv.add_argument(
        "--row-group-size",
        type=_positive_int,
        default=16384,
        metavar="N",
        help="problems per row group (default 16384; a Ray read task reads one)",
    )
    cv.add_argument(
        "--compression",
        default="zstd",
        choices=["zstd", "snappy", "gzip", "lz4", "brotli", "none"],
        help="Parquet compression (default zstd)",
    )
    cv.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    cv.set_defaults(func=_cmd_convert)

    rd = sub.add_parser(
        "rerank-dataset",
        help="rank every problem of a Parquet dataset, streaming",
        description="Rank every problem of a Parquet pass-matrix dataset batch by batch "
        "(memory bounded by --batch-size) into a directory of Parquet part files, "
        "one per batch: task_id, order, scores, weights, fallback and, when the "
        "input has labels, pass@1, pass@2, pass@5. An interrupted run keeps every "
        "finished batch; --resume continues it.",
    )
    rd.add_argument("input", metavar="IN.parquet", help="a Parquet file or directory of files")
    rd.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT.parquet",
        help="output directory of part files (read it with "
        "pyarrow.parquet.read_table(OUT) or pandas.read_parquet(OUT))",
    )
    rd.add_argument(
        "--method",
        default=_registry.DEFAULT_METHOD,
        type=_method_name,
        choices=list(_registry.names()),
        help=f"ranking method (default {_registry.DEFAULT_METHOD})",
    )
    rd.add_argument(
        "--engine",
        default="local",
        choices=ENGINES,
        help="local: this process; ray: Ray Data tasks (default local)",
    )
    rd.add_argument(
        "--address",
        metavar="ADDR",
        help="with --engine ray: HOST:PORT of a running cluster's head (ray start "
        "--head), or 'auto' (RAY_ADDRESS, else the cluster ray start last "
        "started here); default: a new private local cluster, ignoring "
        "RAY_ADDRESS, stopped on exit",
    )
    rd.add_argument(
        "--batch-size",
        type=_batch_size,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"problems per batch, or 'auto': about {AUTO_BATCH_BYTES >> 20} MiB of "
        f"input each, {AUTO_BATCH_ROWS[0]}-{AUTO_BATCH_ROWS[1]} problems "
        f"(default {DEFAULT_BATCH_SIZE})",
    )
    rd.add_argument(
        "--threads",
        type=_positive_int,
        metavar="N",
        help="batches ranked at once locally, one thread each (default: all cores); "
        "threads per Ray task (default 1)",
    )
    rd.add_argument("--backend", help="cpp, numba, torch, numpy or auto")
    rd.add_argument(
        "--skip-invalid",
        action="store_true",
        help="write bad rows to the errors file and go on (default: stop)",
    )
    rd.add_argument(
        "--errors",
        metavar="FILE",
        help="errors file (JSON lines task_id, row, reason; default "
        "OUT.errors.jsonl next to OUT.parquet)",
    )
    again = rd.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the run recorded in OUT: verify its committed parts and "
        "rank only the rest (refused if the input, method or parameters "
        "changed)",
    )
    again.add_argument(
        "--restart",
        action="store_true",
        help="discard the results recorded in OUT and start over (foreign files "
        "are moved aside to OUT/_aces_fast/unknown/)",
    )
    rd.add_argument("--json", action="store_true", help="print the run summary as JSON")
    rd.add_argument("-q", "--quiet", action="store_true", help="no progress, no summary")
    _add_hyperparameters(rd)
    rd.set_defaults(func=_cmd_rerank_dataset)


# ---------------------------------------------------------------------------
# config and bench


def _cmd_config(args: argparse.Namespace) -> int:
    from . import config, show_config

    if args.json:
        print(json.dumps(config(), indent=2, default=str))
    else:
        show_config()
    return 0


def _cmd_warmup(args: argparse.Namespace) -> int:
    from . import available_backends, warmup

    names = [args.backend] if args.backend else available_backends()
    progress = False if args.quiet or args.json else None
    facts = [warmup(name, progress=progress) for name in names]
    if args.json:
        print(json.dumps(facts, indent=2, default=str))
        return 0
    for f in facts:
        if f.get("fused"):
            devices = ", ".join(f"{d} {s:.1f} s" for d, s in f["steps"].items())
            print(
                f"{f['backend']}: fused pair sums ready in {f['seconds']:.1f} s "
                f"({f['compiled']} variants compiled: {devices})"
            )
        elif "compiled" in f:
            print(
                f"{f['backend']}: ready in {f['seconds']:.1f} s ({f['compiled']} kernel "
                f"signatures compiled, {f['loaded']} loaded; disk cache: {f['cache']})"
            )
        else:
            print(f"{f['backend']}: nothing to compile")
    return 0


def _find_benchmarks(explicit: str | None) -> Path:
    """The ``benchmarks/`` directory of a checkout: ``explicit``, else found in the
    current directory or one of its parents (ValueError when there is none)."""

    def is_suite(d: Path) -> bool:
        return (d / "harness" / "command.py").is_file()

    if explicit is not None:
        if not is_suite(Path(explicit)):
            raise ValueError(
                f"--benchmarks {explicit}: not the benchmarks/ directory of an "
                "aces_fast checkout (no harness/command.py in it)"
            )
        return Path(explicit).resolve()
    for d in (Path.cwd(), *Path.cwd().parents):
        if is_suite(d / "benchmarks"):
            return (d / "benchmarks").resolve()
    raise ValueError(
        "'bench' runs the benchmark suite of a checkout of the aces_fast "
        "repository (benchmarks/ is not installed with the package): run it "
        "inside a checkout or pass --benchmarks DIR"
    )


def _run_bench(argv: list[str]) -> int:
    """Run the checkout's benchmark harness (``benchmarks/harness/command.py``)."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--benchmarks")
    pre.add_argument("-h", "--help", action="store_true")
    known = pre.parse_known_args(argv)[0]
    try:
        suite = _find_benchmarks(known.benchmarks)
    except ValueError as exc:
        if not known.help:
            raise
        # the options live in the checkout's harness; say where to get them
        print(
            f"usage: {PROG} bench [options]\n\nTime the backends with the benchmark suite of "
            f"a source checkout.\n{exc}; then '{PROG} bench -h' there lists the options."
        )
        return 0
    sys.path.insert(0, str(suite.parent))
    try:
        command = importlib.import_module("benchmarks.harness.command")
    except ImportError as exc:
        raise ValueError(f"the benchmark harness in {suite} could not be imported: {exc}") from None
    rc = command.main(argv, suite)
    return 0 if rc is None else int(rc)


# ---------------------------------------------------------------------------
# parser and entry point


_INVALID_CHOICE = re.compile(r"invalid choice: '?([^' ]*)'? \(choose from (.*)\)$")


class Parser(argparse.ArgumentParser):
    """argparse with the command line's error style: a usage error is one
    ``aces-fast: error:`` line (the usage block is what ``-h`` is for), exit
    status 2, and a mistyped choice gets the closest names suggested."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        match = _INVALID_CHOICE.search(message)
        if match:
            import difflib

            given, listed = match.groups()
            choices = [c.strip().strip("'\"") for c in listed.split(",")]
            close = difflib.get_close_matches(given.lower(), choices, n=3, cutoff=0.5)
            message = _INVALID_CHOICE.sub(f"invalid choice: '{given}'", message)
            message += (
                f"; did you mean {' or '.join(repr(c) for c in close)}?"
                if close
                else f"; choose from {', '.join(choices)}"
            )
        command = self.prog.split(" ", 1)[1] + ": " if " " in self.prog else ""
        self.exit(2, f"{PROG}: error: {command}{message} (see '{self.prog} -h')\n")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser (``bench`` is listed but parsed by the checkout's harness)."""
    from . import __version__, _registry
    from .datasets import BUNDLED, DEFAULT_DATASET
    from .evaluation import ALL_METHODS

    parser = Parser(
        prog=PROG,
        description="Rank LLM-generated code candidates by LLM-generated tests with ACES "
        "(leave-one-out AUC consistency) and evaluate ranking methods.",
        epilog=f"Run '{PROG} COMMAND -h' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    ev = sub.add_parser(
        "evaluate",
        help="Pass@k of every method on labelled data (default: bundled HumanEval)",
        description="Run every ranking method on every problem of a labelled dataset and "
        "report Pass@k (exact, ties broken at random) over all problems and over "
        "the mixed ones (0 < correct < n), the time per method and test "
        "diagnostics.",
    )
    ev.add_argument(
        "datasets",
        nargs="*",
        metavar="DATASET",
        help=f"bundled name ({', '.join(BUNDLED)}), 'all' (every bundled "
        f"dataset), a .npz/.jsonl path, or '-' (standard input); default "
        f"{DEFAULT_DATASET}",
    )
    ev.add_argument(
        "--methods",
        type=_method_list,
        metavar="M1,M2,...",
        help=f"comma-separated subset of: {', '.join(ALL_METHODS)} (default all)",
    )
    ev.add_argument(
        "--ks",
        type=_ks,
        default=[1, 2, 5],
        metavar="K1,K2,...",
        help="the k of Pass@k (default 1,2,5)",
    )
    ev.add_argument(
        "--backend",
        help="cpp, numba, torch, numpy or auto (default: $ACES_FAST_BACKEND, else auto)",
    )
    ev.add_argument(
        "--json",
        action="store_true",
        help='print JSON instead of the tables: {"datasets": [one object per '
        "dataset]} (Pass@k as fractions)",
    )
    ev.add_argument("--plot", metavar="FILE.png", help="also save a bar chart (needs matplotlib)")
    ev.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    _add_hyperparameters(ev)
    _add_limits(ev)
    ev.set_defaults(func=_cmd_evaluate)

    rr = sub.add_parser(
        "rerank",
        help="rank the candidates of one pass matrix file",
        description="Rank the candidates of a pass matrix (rows candidates, columns tests, "
        "0/1) and show scores and test weights. FILE: .npy (2-D array), .npz "
        "(single array, key 'B', or the dataset layout), .csv (0/1, comma-separated, "
        "no header), .jsonl or .parquet (dataset layouts), or a bundled dataset "
        "name "
        f"({', '.join(BUNDLED)}); from a dataset, the first problem or --task.",
    )
    rr.add_argument(
        "file",
        metavar="FILE",
        help="the matrix file, a bundled dataset name, or '-' for standard input",
    )
    rr.add_argument(
        "--method",
        default=_registry.DEFAULT_METHOD,
        type=_method_name,
        choices=list(_registry.names()),
        help=f"ranking method (default {_registry.DEFAULT_METHOD}; any case)",
    )
    rr.add_argument(
        "--task",
        metavar="ID",
        help="task_id to take from a dataset (.jsonl, .npz, bundled name; default "
        "the first problem), e.g. HumanEval/0",
    )
    rr.add_argument(
        "--top",
        type=_positive_int,
        metavar="N",
        help="list only the N best candidates and the N largest test weights "
        "(with --json: the 'ranking' and 'tests' lists; the arrays 'order', "
        "'scores', 'weights', 'loo_auc' stay complete)",
    )
    rr.add_argument(
        "--backend",
        help="cpp, numba, torch, numpy or auto (default: $ACES_FAST_BACKEND, else auto)",
    )
    rr.add_argument(
        "--json",
        action="store_true",
        help="print JSON: 'ranking' (best first), 'tests' (non-zero weights, "
        "largest first), and 'order', 'scores', 'weights', 'loo_auc' in "
        "candidate / test index order",
    )
    _add_hyperparameters(rr)
    _add_limits(rr)
    rr.set_defaults(func=_cmd_rerank)

    _add_dataset_commands(sub)

    sub.add_parser(
        "bench",
        help="run the benchmark suite of a source checkout (options: aces-fast bench -h)",
        add_help=False,
    )

    cf = sub.add_parser("config", help="versions and available backends")
    cf.add_argument("--json", action="store_true", help="print JSON")
    cf.set_defaults(func=_cmd_config)

    wu = sub.add_parser(
        "warmup",
        help="compile the numba kernels now (kept in the per-user disk cache)",
        description="Compile every numba kernel (or load it from the per-user disk cache) so "
        "that no later call pays the JIT: tens of seconds the first time on a "
        "machine, about a second afterwards. The torch backend in its fused mode "
        "(ACES_FAST_TORCH_FUSED=1) compiles its pair sums. Other backends need nothing.",
    )
    wu.add_argument("--backend", help="only this backend (default: every available one)")
    wu.add_argument("-q", "--quiet", action="store_true", help="no progress")
    wu.add_argument("--json", action="store_true", help="print JSON")
    wu.set_defaults(func=_cmd_warmup)
    return parser


def _show_warning(
    message: Any,
    category: Any,
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
    *,
    _default: Any = warnings.showwarning,
) -> None:
    """The library's own warnings (the fallback from the compiled backend, ...) as one
    ``aces-fast: warning:`` line, like the errors; anyone else's as Python shows them."""
    if os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep):
        print(
            f"{PROG}: warning: " + " ".join(str(message).splitlines()),
            file=sys.stderr if file is None else file,
        )
    else:
        _default(message, category, filename, lineno, file, line)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``aces-fast``; returns the exit status."""
    from ._startup import CompileInterrupts, restore_interrupt

    restore_interrupt()  # from here on a Ctrl-C is a KeyboardInterrupt, handled below,
    argv = list(sys.argv[1:] if argv is None else argv)
    # except during numba compilation: there it exits 130 at once (see _startup)
    with warnings.catch_warnings(), CompileInterrupts():
        warnings.showwarning = _show_warning
        return _main(argv)


def _main(argv: list[str]) -> int:
    try:
        if argv and argv[0] == "bench":
            return _run_bench(argv[1:])
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:  # no command: a usage error
            parser.print_help(sys.stderr)
            return 2
        return args.func(args)
    except (ValueError, TypeError, KeyError, OSError, ImportError, BackendUnavailableError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        _error(str(msg))
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except MemoryError as exc:
        if _traceback_wanted():
            raise
        _error(f"out of memory{_where(exc)}")
        return 1
    except _LoadFailure as failure:
        if _traceback_wanted():
            raise failure.exc from None
        _error(f"{failure.what}: loading failed unexpectedly: {_unexpected(failure.exc)}")
        return 1
    except Exception as exc:  # the CLI never shows a traceback
        if _traceback_wanted():
            raise
        _error(f"internal error: {_unexpected(exc)}")
        return 1


def _traceback_wanted() -> bool:
    """``ACES_FAST_TRACEBACK`` on (:func:`aces_fast._env.flag`); a value that is no
    switch word counts as on: it was set to see the traceback."""
    try:
        return env_flag(_env.TRACEBACK, False)
    except ValueError:
        return True


#: "--resume (resume=True)": the library names both spellings; the command line
#: shows its own only.
_PY_SPELLING = re.compile(r" \((?:resume|restart|skip_invalid)=True\)")


def _error(message: str) -> None:
    """One line on stderr, whatever line breaks the message holds."""
    print(
        f"{PROG}: error: " + _PY_SPELLING.sub("", " ".join(message.splitlines())), file=sys.stderr
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
