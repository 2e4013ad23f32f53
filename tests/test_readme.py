"""The README works as written: its Python blocks run, its command lines parse, and
its first screen states what a newcomer needs.

A Python block is skipped only when the line before it says
``<!-- readme-test: not run (reason) -->``; the blocks run in document order in
one namespace, like a notebook, so a later section may use the API tour's ``B``.
"""

from __future__ import annotations

import re
import shlex
from importlib import resources
from pathlib import Path

import pytest

import aces_fast as af
from aces_fast import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NOT_RUN = re.compile(r"<!-- readme-test: not run \((?P<why>.+)\) -->")
FENCE = re.compile(r"^```(\w*)\s*$")


def fenced_blocks(text: str) -> list[tuple[str, str, str | None, int]]:
    """``(language, code, the line before the fence, line number)`` of every
    fenced block, in order."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        before = lines[start - 1] if start > 0 else None
        blocks.append((m.group(1), "\n".join(body) + "\n", before, start + 1))
        i += 1
    return blocks


def _run_python_blocks(path: Path, tmp_path: Path, monkeypatch) -> list[int]:
    monkeypatch.chdir(tmp_path)  # anything a block writes lands here
    monkeypatch.delenv("ACES_FAST_BACKEND", raising=False)
    namespace: dict = {"__name__": "__readme__"}
    ran = []
    for lang, code, before, line in fenced_blocks(path.read_text(encoding="utf-8")):
        if lang != "python":
            continue
        if before is not None and NOT_RUN.search(before):
            continue
        try:
            exec(compile(code, f"{path.name}, block at line {line}", "exec"), namespace)
        except Exception as exc:  # name the block that failed
            pytest.fail(
                f"{path.name}: the Python block at line {line} fails: {type(exc).__name__}: {exc}"
            )
        ran.append(line)
    return ran


@pytest.fixture
def compiled():
    if "cpp" not in af.available_backends():
        pytest.skip("the README's large-pool example calls the cpp-only binned ACES-O")


def test_readme_python_blocks_run(tmp_path, monkeypatch, compiled):
    ran = _run_python_blocks(README, tmp_path, monkeypatch)
    text = README.read_text(encoding="utf-8")
    tour = text.index("## API tour")
    # the API tour runs in a fresh namespace, so it defines everything it uses
    first = text.count("\n", 0, text.index("```python", tour)) + 1
    assert ran and ran[0] == first
    skipped = [
        b
        for b in fenced_blocks(text)
        if b[0] == "python" and b[2] is not None and NOT_RUN.search(b[2])
    ]
    assert len(skipped) <= 1, "skip a README block only when it truly cannot run here"


def test_readme_tour_defines_its_names(tmp_path, monkeypatch, compiled):
    """The names the issue found undefined are assigned in the tour itself."""
    text = README.read_text(encoding="utf-8")
    tour = next(code for lang, code, _, line in fenced_blocks(text) if lang == "python")
    for name in ("B", "y", "w", "output_hashes", "quality", "consensus"):
        assert re.search(rf"^{name} = ", tour, re.M), name
    assert "load_dataset(" in tour and ".labels" in tour


def test_bundled_data_readme_runs_and_names_only_shipped_files(tmp_path, monkeypatch):
    data = resources.files("aces_fast") / "data"
    path = Path(str(data / "README.md"))
    assert path.is_file(), "the data README is installed with the package"
    assert _run_python_blocks(path, tmp_path, monkeypatch)
    text = path.read_text(encoding="utf-8")
    # a file named in backticks without a folder is one of ours (paths with a folder
    # are the upstream sources of the data)
    named = {
        span
        for span in re.findall(r"`([^`/\s]+)`", text)
        if re.search(r"^\w[\w.-]*\.(?:npz|npy|json|jsonl|gz|md|csv|txt|parquet)$", span)
    }
    assert {"humaneval_codet_codegen16b.npz", "humaneval_agentcoder_gpt35turbo1106.npz"} <= named
    shipped = {entry.name for entry in data.iterdir()}
    assert named <= shipped, (
        f"the data README names files that are not shipped: {sorted(named - shipped)}"
    )
    assert "shared" not in text.lower()


def _command_lines(text: str) -> list[tuple[int, list[str]]]:
    """Every ``aces-fast ...`` invocation in the README's bash blocks, as argv."""
    found = []
    for lang, code, _, line in fenced_blocks(text):
        if lang != "bash":
            continue
        code = code.replace("\\\n", " ")
        for raw in code.splitlines():
            raw = re.sub(r"\s+#.*$", "", raw)
            for segment in re.split(r"&&|\||<", raw):
                words = shlex.split(segment.replace("[", "").replace("]", ""))
                if words[:1] == ["aces-fast"]:
                    found.append((line, words[1:]))
    return found


def test_readme_command_lines_parse():
    commands = _command_lines(README.read_text(encoding="utf-8"))
    assert len(commands) >= 10
    parser = cli.build_parser()
    seen = set()
    for line, argv in commands:
        if argv[0] == "bench":  # parsed by the checkout's harness: tests/test_bench_command.py
            continue
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"README block at line {line}: `aces-fast {' '.join(argv)}` does not parse")
        seen.add(argv[0])
    assert {"evaluate", "rerank", "config", "convert", "rerank-dataset"} <= seen


def _first_screen() -> str:
    text = README.read_text(encoding="utf-8")
    return text[: text.index("## API tour")]


def test_first_screen_says_what_it_is_what_to_install_and_what_next():
    screen = _first_screen()
    assert "pass matrix" in screen and "ACES" in screen
    # prerequisites, read from the build files so they cannot drift
    requires = re.search(
        r'requires-python = ">=(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text()
    ).group(1)
    assert f"Python {requires} or newer" in screen
    cmake = re.search(
        r"cmake_minimum_required\(VERSION (\d+\.\d+)", (ROOT / "CMakeLists.txt").read_text()
    ).group(1)
    assert f"CMake ≥ {cmake}" in screen
    assert re.search(r"CMAKE_CXX_STANDARD 17", (ROOT / "CMakeLists.txt").read_text())
    assert "C++17 compiler" in screen
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in screen
    for next_step in ("aces-fast config", "aces-fast rerank humaneval-gpt35", "-h"):
        assert next_step in screen
    assert len(screen.splitlines()) <= 60  # a first screen, not a manual


def test_first_screen_commands_and_the_ci_block():
    screen = _first_screen()
    blocks = [(code, before) for lang, code, before, _ in fenced_blocks(screen) if lang == "bash"]
    assert len(blocks) == 3  # from a wheel, from source, the test suite
    (wheel, _), (first, _), (ci, marker) = blocks
    assert wheel.strip() == (
        "python3 -m venv .venv && . .venv/bin/activate && pip install "
        "aces_fast && aces-fast evaluate all"
    )
    assert first.strip() == (
        "python3 -m venv .venv && . .venv/bin/activate && pip install . && aces-fast evaluate all"
    )
    assert screen.index("From a wheel") < screen.index("From source") < screen.index(marker)
    # .ci/run executes the block right after the marker verbatim
    assert marker == "<!-- ci:test -->"
    assert "<!-- ci:test -->" in (ROOT / ".ci" / "run").read_text()
    extras = re.search(r'pip install "\.\[([\w,]+)\]"', ci).group(1).split(",")
    assert {"test", "numba", "plot", "arrow", "ray", "docs"} <= set(extras)
    assert ci.index("pip install torch") < ci.index('pip install ".[')  # CPU torch first
    assert ci.strip().endswith('python -m pytest -q -m "not slow"')


def test_readme_stays_short_and_links_the_moved_material():
    """The README is a front page (under 350 lines); reference material lives in
    docs/, and every docs file it links to exists."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 350
    assert "docs/benchmarks.md" in text
    for target in re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)", text):
        assert (ROOT / target).is_file(), target
    for named in re.findall(r"`((?:docs/|CONTRIBUTING)[\w./-]+)`", text):
        assert (ROOT / named).is_file(), named
    # what a user must still find on the front page
    for kept in (
        "**Platforms.**",
        "manylinux_2_28",
        "**Exactly once.**",
        "--resume",
        "| operation | family | size | cpp |",
    ):
        assert kept in text, kept
    assert "Measured throughput" in (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
