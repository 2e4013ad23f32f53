"""The ``aces-fast`` command line (also ``python -m aces_fast``).

Subcommands:

* ``evaluate [DATASET ...]`` -- every ranking method on labelled data: Pass@1/2/5
  over all and over mixed problems, time per method, test diagnostics.
  ``DATASET`` is a bundled name (``humaneval-codegen16b``, the default, or
  ``humaneval-gpt35``), ``all`` (both bundled datasets) or a ``.npz`` /
  ``.jsonl`` path.
* ``rerank FILE`` -- rank the candidates of one pass matrix (npy, npz, csv,
  jsonl) and show scores and test weights.
* ``bench`` -- backend benchmarks (provided by :mod:`aces_fast.bench`).
* ``config`` -- versions and available backends.

Errors in the input (bad files, unknown names, unavailable backends) print one
line ``aces-fast: error: ...`` to stderr and exit with status 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

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


#: the value of a hyperparameter flag the user did not give
_UNSET = object()


def _hyperparameter_flags() -> List[Any]:
    """``(flag, dest, family, Param)`` of every tunable hyperparameter, from the
    declarations of :mod:`aces_fast._registry`: ``--<family>-<name>``."""
    from . import _registry

    out = []
    for family, params in _registry.tunable_families().items():
        for p in params:
            flag = f"--{family}-{p.name.replace('_', '-')}"
            out.append((flag, flag[2:].replace("-", "_"), family, p))
    return out


def _add_hyperparameters(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "method hyperparameters (default: the library's, i.e. the paper's)")
    for flag, dest, family, p in _hyperparameter_flags():
        default = "all" if p.default is None else p.default
        g.add_argument(flag, dest=dest, type=p.check.parse, metavar=p.metavar, default=_UNSET,
                       help=f"{family}: {p.help} (default {default})")


def _overrides(args: argparse.Namespace) -> Dict[str, Dict[str, Any]]:
    """Hyperparameters the user set, by method family (for ``evaluate``'s ``params``)."""
    out: Dict[str, Dict[str, Any]] = {}
    for _, dest, family, p in _hyperparameter_flags():
        value = getattr(args, dest, _UNSET)
        if value is not _UNSET:
            out.setdefault(family, {})[p.name] = value
    return out


def _method_list(text: str) -> List[str]:
    from .evaluation import ALL_METHODS

    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in names if t not in ALL_METHODS]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"unknown method(s) {', '.join(bad) or '(none given)'}; choose from "
            f"{', '.join(ALL_METHODS)}")
    return names


def _ks(text: str) -> List[int]:
    try:
        ks = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}") from None
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
            print(f"\r{self.desc}: {self.count}/{self.total} ({method})".ljust(60),
                  end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self.count:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# evaluate


def _dataset_names(items: Sequence[str]) -> List[str]:
    from .datasets import BUNDLED, DEFAULT_DATASET

    names: List[str] = []
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
                ax.bar([x + (i - (len(ev.ks) - 1) / 2) * width for x in range(len(ev.methods))],
                       vals, width, label=f"Pass@{k}")
            n = int(ev.labelled.sum() if subset == "all" else ev.mixed.sum())
            ax.set_title(f"{ev.dataset}: {subset} problems ({n})")
            ax.set_xticks(range(len(ev.methods)))
            ax.set_xticklabels(ev.methods, rotation=35, ha="right")
            ax.set_ylabel("Pass@k (%)")
            ax.set_ylim(0, 100)
            ax.grid(axis="y", alpha=0.3)
            if r == 0 and c == 0:
                ax.legend(loc="upper left")
    fig.savefig(path, dpi=120)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from .datasets import load_dataset
    from .evaluation import evaluate

    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError("--plot needs matplotlib, which is not installed: "
                             "pip install matplotlib (or aces_fast[plot])") from None
    params = _overrides(args)
    show = not args.quiet and sys.stderr.isatty()
    # Load everything first so a bad name fails before any long run.
    datasets = [load_dataset(name) for name in _dataset_names(args.datasets)]
    results = []
    for ds in datasets:
        progress = _Progress(len(ds) * len(args.methods or _all_methods()), ds.name, show)
        try:
            ev = evaluate(ds, args.methods, ks=args.ks, backend=args.backend, params=params,
                          progress=progress)
        finally:
            progress.close()
        results.append(ev)
        if not args.json:
            print(ev.table() + ("\n" if len(results) < len(datasets) else ""), flush=True)
    if args.json:
        out = (results[0].to_dict() if len(results) == 1
               else {ev.dataset: ev.to_dict() for ev in results})
        print(json.dumps(out, indent=2, allow_nan=False))
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
    from . import _registry
    from .datasets import load_pass_matrix
    from .methods import rerank

    prob = load_pass_matrix(args.file, task=args.task)
    overrides = _overrides(args)
    family = _registry.get(args.method).family
    ignored = [f for f in overrides if f != family]
    if ignored:
        print(f"{PROG}: warning: hyperparameters for {', '.join(ignored)} are ignored by "
              f"--method {args.method}", file=sys.stderr)
    params = _registry.method_params(args.method, overrides.get(family), tunable=True)
    res = rerank(prob.B, args.method, backend=args.backend, **params)
    scores = _tolist(res.scores)
    order = [int(i) for i in (res.order.tolist() if hasattr(res.order, "tolist") else res.order)]
    weights = _tolist(res.weights)
    loo = _tolist(res.loo_auc)
    top = len(order) if args.top is None else min(args.top, len(order))
    labels = None if prob.labels is None else [int(v) for v in prob.labels]
    if args.json:
        out = {
            "file": str(args.file), "task_id": prob.task_id, "method": res.method,
            "backend": res.backend, "n": prob.n, "m": prob.m, "params": params,
            "ranking": [{"rank": r + 1, "candidate": i, "score": scores[i],
                         **({"correct": labels[i]} if labels else {})}
                        for r, i in enumerate(order[:top])],
            "order": order, "scores": scores, "weights": weights,
            "loo_auc": None if loo is None else _nan_to_none(loo),
            "fallback": bool(res.fallback),
        }
        if res.objective is not None:
            out["objective"] = _tolist(res.objective)
        print(json.dumps(out, indent=2, allow_nan=False))
        return 0
    hp = (" " + " ".join(f"{k}={v}" for k, v in params.items())) if params else ""
    print(f"{args.file} [{prob.task_id}]: n={prob.n} candidates, m={prob.m} tests; "
          f"method {res.method}{hp} (backend {res.backend})")
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
    nz = sorted((j for j in range(len(weights)) if weights[j] > 0),
                key=lambda j: (-weights[j], j))
    shown = nz if args.top is None else nz[:args.top]
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
# config and bench


def _cmd_config(args: argparse.Namespace) -> int:
    from . import config, show_config

    if args.json:
        print(json.dumps(config(), indent=2, default=str))
    else:
        show_config()
    return 0


def _run_bench(argv: List[str]) -> int:
    """Import :mod:`aces_fast.bench` only now: it is optional and may be heavy."""
    try:
        bench = importlib.import_module("aces_fast.bench")
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "aces_fast.bench":
            raise ValueError("the 'bench' subcommand needs the module aces_fast.bench, which "
                             "this installation of aces_fast does not include") from None
        raise ValueError(f"aces_fast.bench could not be imported: {exc}") from None
    parser = argparse.ArgumentParser(prog=f"{PROG} bench",
                                     description=(bench.__doc__ or "").strip() or None,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_arguments(parser)
    args = parser.parse_args(argv)
    rc = bench.run(args)
    return 0 if rc is None else int(rc)


# ---------------------------------------------------------------------------
# parser and entry point


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser (``bench`` is listed but parsed by :mod:`aces_fast.bench`)."""
    from . import __version__, _registry
    from .datasets import BUNDLED, DEFAULT_DATASET
    from .evaluation import ALL_METHODS

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Rank LLM-generated code candidates by LLM-generated tests with ACES "
                    "(leave-one-out AUC consistency) and evaluate ranking methods.",
        epilog=f"Run '{PROG} COMMAND -h' for a command's options.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    ev = sub.add_parser(
        "evaluate", help="Pass@k of every method on labelled data (default: bundled HumanEval)",
        description="Run every ranking method on every problem of a labelled dataset and "
                    "report Pass@k (exact, ties broken at random) over all problems and over "
                    "the mixed ones (0 < correct < n), the time per method and test "
                    "diagnostics.")
    ev.add_argument("datasets", nargs="*", metavar="DATASET",
                    help=f"bundled name ({', '.join(BUNDLED)}), 'all' (every bundled "
                         f"dataset) or a .npz/.jsonl path; default {DEFAULT_DATASET}")
    ev.add_argument("--methods", type=_method_list, metavar="M1,M2,...",
                    help=f"comma-separated subset of: {', '.join(ALL_METHODS)} (default all)")
    ev.add_argument("--ks", type=_ks, default=[1, 2, 5], metavar="K1,K2,...",
                    help="the k of Pass@k (default 1,2,5)")
    ev.add_argument("--backend", help="cpp, numba, torch, numpy or auto (default: "
                                      "$ACES_FAST_BACKEND, else auto)")
    ev.add_argument("--json", action="store_true",
                    help="print JSON (Pass@k as fractions) instead of the table")
    ev.add_argument("--plot", metavar="FILE.png", help="also save a bar chart (needs matplotlib)")
    ev.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    _add_hyperparameters(ev)
    ev.set_defaults(func=_cmd_evaluate)

    rr = sub.add_parser(
        "rerank", help="rank the candidates of one pass matrix file",
        description="Rank the candidates of a pass matrix (rows candidates, columns tests, "
                    "0/1) and show scores and test weights. FILE: .npy (2-D array), .npz "
                    "(single array, key 'B', or the dataset layout), .csv (0/1, no header), "
                    ".jsonl (dataset layout; first problem or --task).")
    rr.add_argument("file", metavar="FILE")
    rr.add_argument("--method", default=_registry.DEFAULT_METHOD, choices=list(_registry.names()),
                    help=f"ranking method (default {_registry.DEFAULT_METHOD})")
    rr.add_argument("--task", metavar="ID", help="task_id to take from a .jsonl/.npz dataset")
    rr.add_argument("--top", type=_positive_int, metavar="N",
                    help="show only the N best candidates and N largest test weights")
    rr.add_argument("--backend", help="cpp, numba, torch, numpy or auto")
    rr.add_argument("--json", action="store_true", help="print JSON")
    _add_hyperparameters(rr)
    rr.set_defaults(func=_cmd_rerank)

    sub.add_parser("bench", help="benchmark the backends (options: aces-fast bench -h)",
                   add_help=False)

    cf = sub.add_parser("config", help="versions and available backends")
    cf.add_argument("--json", action="store_true", help="print JSON")
    cf.set_defaults(func=_cmd_config)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``aces-fast``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "bench":
            return _run_bench(argv[1:])
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help()
            return 0
        return args.func(args)
    except (ValueError, TypeError, KeyError, OSError, BackendUnavailableError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
