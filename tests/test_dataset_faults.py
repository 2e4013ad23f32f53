"""Fault injection on dataset runs (``rerank-dataset``, local engine): whatever the
operator or the disk does, the final output holds every input task id exactly
once with the values of a clean run, the errors file is valid JSON Lines, and
the exit status and message are the documented ones (docs/parquet.md).

The long variants (chains of kills) are marked ``slow``."""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from benchmarks.harness.stream_scale import write_synthetic

from aces_fast._commit import OutputBusyError, ResultsDir
from aces_fast.cli import main
from aces_fast.datasets import Problem
from aces_fast.parquet import InvalidRowError, pack_rows, save_parquet, schema
from aces_fast.stream import default_errors_path, rerank_dataset
from helpers import labelled_problems, stop_after

_RUN = """
import sys
from aces_fast.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _dataset(tmp_path, count=600, row_group_size=100, name="in.parquet", **kw):
    path = tmp_path / name
    save_parquet(labelled_problems(count, **kw), path, row_group_size=row_group_size)
    return path


def _plain(table):
    return table.replace_schema_metadata(None).sort_by("task_id")


def _clean(path, tmp_path, method="aces-c", **kw):
    out = tmp_path / f"clean-{method}"
    if not out.exists():
        rerank_dataset(path, out, method, **kw)
    return _plain(pq.read_table(out))


def _input_ids(path):
    return pq.read_table(path, columns=["task_id"]).column(0).to_pylist()


def assert_exactly_once(out, clean, ids=None):
    """Every task id once, values equal to the clean run's bit for bit."""
    got = pq.read_table(out)
    tids = got.column("task_id").to_pylist()
    assert len(tids) == len(set(tids)), "duplicated task ids"
    if ids is not None:
        assert sorted(tids) == sorted(ids)
    assert _plain(got).equals(clean)


def assert_valid_errors_file(path, rows):
    """Valid JSON Lines, one line per bad row, each row once."""
    lines = path.read_bytes().decode().split("\n")
    assert lines[-1] == "", "the last line is cut"
    recs = [json.loads(x) for x in lines[:-1]]
    assert sorted(r["row"] for r in recs) == sorted(rows)
    return recs


def _start(args):
    return subprocess.Popen(
        [sys.executable, "-c", _RUN, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(cond, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the run ended first: {proc.communicate()}")
        time.sleep(0.01)
    pytest.fail("timed out")


def _parts(out):
    return sorted(out.glob("part-*.parquet"))


def _snapshot(root):
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in Path(root).rglob("*")
    )


# -- one writer at a time ------------------------------------------------------------


def test_a_second_writer_fails_at_once_and_touches_nothing(tmp_path):
    path = _dataset(tmp_path)
    out = tmp_path / "o.parquet"
    rerank_dataset(path, out, "aces-c", batch_size=100)
    errs = default_errors_path(out)
    errs.write_text('{"task_id": "x", "row": 1, "reason": "kept"}\n')
    holder = ResultsDir(out, errs)  # this process holds the lock, as a running run would
    try:
        before = _snapshot(tmp_path)
        tick = time.monotonic()
        for kw in ({}, {"resume": True}, {"restart": True}):
            with pytest.raises(
                OutputBusyError,
                match=rf"another run \(pid {os.getpid()}\) is "
                "writing there",
            ):
                rerank_dataset(path, out, "aces-c", **kw)
        assert time.monotonic() - tick < 5
        assert _snapshot(tmp_path) == before
    finally:
        holder.close(complete=False)
    assert main(["rerank-dataset", str(path), "-o", str(out), "--resume", "-q"]) == 0


def test_the_run_that_loses_the_lock_removes_nothing(tmp_path, monkeypatch):
    """Both runs saw no directory and both think they created it: the one that
    loses the lock must leave it to the holder (CI once saw it removed)."""
    out, errs = tmp_path / "new" / "o.parquet", tmp_path / "errs.jsonl"
    holder = ResultsDir(out, errs)
    assert holder.created
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda p: False if p == out else real_exists(p))
    with pytest.raises(OutputBusyError):
        ResultsDir(out, errs)
    monkeypatch.undo()
    assert (out / "_aces_fast" / "lock").is_file()
    holder.begin({"method": "aces-c"}, resume=False, restart=False)
    holder.close(complete=False)
    assert not out.exists()  # the holder created it and committed nothing


def test_a_lock_on_a_removed_directory_is_taken_again(tmp_path, monkeypatch):
    """A run that waited behind one removing its unused directory locks an
    unlinked file; it must notice and lock the new directory instead."""
    import aces_fast._commit as commit

    out, errs = tmp_path / "o.parquet", tmp_path / "errs.jsonl"
    holder = ResultsDir(out, errs)
    real, calls = commit._try_lock, []

    def after_the_holder_left(fd):
        if not calls:
            calls.append(fd)
            holder.close(complete=False)  # removes the directory it created
            assert not out.exists()
        return real(fd)

    monkeypatch.setattr(commit, "_try_lock", after_the_holder_left)
    second = ResultsDir(out, errs)
    try:
        assert len(calls) == 1 and second._lock is not None
        assert commit._same_file(second._lock._fd, out / "_aces_fast" / "lock")
        monkeypatch.setattr(commit, "_try_lock", real)
        with pytest.raises(OutputBusyError):
            ResultsDir(out, errs)
    finally:
        second.close(complete=False)


def test_two_concurrent_runs_one_output(tmp_path):
    """Two processes started together into one directory: one writes, the other
    stops with one line; the result is complete and exact."""
    path = tmp_path / "in.parquet"
    write_synthetic(path, 1500, 30, 40, seed=2, row_group_size=250)
    out = tmp_path / "o.parquet"
    args = [
        "rerank-dataset",
        path,
        "-o",
        out,
        "--method",
        "aces-o",
        "--aces-o-steps",
        "20",
        "--batch-size",
        "100",
        "--threads",
        "1",
        "-q",
    ]
    procs = [_start(args), _start(args)]
    results = [p.communicate(timeout=300) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], results
    loser = results[[p.returncode for p in procs].index(1)][1].strip()
    assert len(loser.splitlines()) == 1 and loser.startswith("aces-fast: error: ")
    assert "another run (pid" in loser or "already holds results" in loser
    clean = _clean(path, tmp_path, "aces-o", steps=20, n_threads=1)
    assert_exactly_once(out, clean, _input_ids(path))


# -- what the directory holds ------------------------------------------------------


def _partial(path, out, monkeypatch, commits=2, **kw):
    undo = stop_after(monkeypatch, commits)
    with pytest.raises(KeyboardInterrupt):
        rerank_dataset(path, out, "aces-c", batch_size=100, **kw)
    undo()


def test_foreign_and_copied_files_are_moved_aside_not_read(tmp_path, monkeypatch):
    path = _dataset(tmp_path)
    clean = _clean(path, tmp_path)
    out = tmp_path / "o.parquet"
    _partial(path, out, monkeypatch)
    shutil.copy(_parts(out)[0], out / "part-copy.parquet")  # a copied part
    save_parquet(labelled_problems(5, prefix="x"), out / "data.parquet")  # a foreign table
    (out / "part-old.parquet").write_bytes(b"not parquet at all")
    with pytest.warns(UserWarning, match="not a committed part") as caught:
        s = rerank_dataset(path, out, "aces-c", batch_size=100, resume=True)
    said = " ".join(str(w.message) for w in caught)
    for name in ("part-copy.parquet", "data.parquet", "part-old.parquet"):
        assert f"{name}: not a committed part of this run; moved to" in said
        assert (out / "_aces_fast" / "unknown" / name).exists()
    assert (s.resumed, s.written) == (200, 400)
    assert_exactly_once(out, clean, _input_ids(path))


def test_a_fresh_run_refuses_a_directory_of_other_files(tmp_path):
    path = _dataset(tmp_path)
    out = tmp_path / "o.parquet"
    out.mkdir()
    (out / "part-old.parquet").write_bytes(b"x")
    with pytest.raises(ValueError, match="already holds results .*1 files not written by"):
        rerank_dataset(path, out)
    with pytest.raises(ValueError, match="no commit record of aces-fast .*part-old.parquet"):
        rerank_dataset(path, out, resume=True)
    with pytest.warns(UserWarning, match="part-old.parquet: not a part of this output; moved"):
        rerank_dataset(path, out, restart=True)
    assert_exactly_once(out, _clean(path, tmp_path), _input_ids(path))


@pytest.mark.parametrize("where", ["middle", "footer"])
def test_a_damaged_part_is_redone(tmp_path, monkeypatch, where):
    path = _dataset(tmp_path)
    clean = _clean(path, tmp_path)
    out = tmp_path / "o.parquet"
    _partial(path, out, monkeypatch, commits=3)
    victim = _parts(out)[1]
    data = bytearray(victim.read_bytes())
    pos = len(data) // 2 if where == "middle" else len(data) - 20
    data[pos] ^= 0x5A
    victim.write_bytes(bytes(data))
    if where == "middle":  # the footer is intact: a reader alone would not notice
        assert pq.ParquetFile(victim).metadata.num_rows == 100
    with pytest.warns(UserWarning, match=f"{victim.name}: damaged .* its rows are ranked again"):
        s = rerank_dataset(path, out, "aces-c", batch_size=100, resume=True)
    assert (s.resumed, s.written) == (200, 400)
    assert_exactly_once(out, clean, _input_ids(path))


def test_a_committed_part_left_in_staging_is_rolled_forward(tmp_path, monkeypatch):
    """A kill between the commit record and the rename: the next run finishes it."""
    path = _dataset(tmp_path)
    out = tmp_path / "o.parquet"
    _partial(path, out, monkeypatch, commits=2)
    last = _parts(out)[-1]
    os.replace(last, out / "_aces_fast" / "staging" / last.name)
    s = rerank_dataset(path, out, "aces-c", batch_size=100, resume=True)
    assert (s.resumed, s.written) == (200, 400)
    assert last.exists()
    assert_exactly_once(out, _clean(path, tmp_path), _input_ids(path))


def test_parts_staged_ahead_of_a_stopped_commit_are_never_read(tmp_path, monkeypatch):
    """Ranking threads stage their parts (write and fsync) before the commit thread
    takes them in order. A run stopped after two commits leaves later batches'
    parts staged but not committed: they are neither results nor resumed work,
    and the next run deletes them and redoes those rows."""
    path = _dataset(tmp_path)
    out = tmp_path / "o.parquet"
    staged = []
    real_stage = ResultsDir.stage

    def stage(self, data):
        part = real_stage(self, data)
        staged.append(part.path.name)
        return part

    monkeypatch.setattr(ResultsDir, "stage", stage)
    _partial(path, out, monkeypatch, commits=2, n_threads=3)
    assert len(staged) > 2  # batches ahead of the commits were staged
    pending = sorted(p.name for p in (out / "_aces_fast" / "staging").iterdir())
    assert pending and set(pending) <= set(staged)
    assert len(_parts(out)) == 2 and pq.read_table(out).num_rows == 200
    s = rerank_dataset(path, out, "aces-c", batch_size=100, resume=True, n_threads=3)
    assert (s.resumed, s.written) == (200, 400)
    assert not list((out / "_aces_fast" / "staging").iterdir())
    assert_exactly_once(out, _clean(path, tmp_path), _input_ids(path))


def test_a_staged_part_commits_with_its_bytes_and_checksum(tmp_path, monkeypatch):
    """ResultsDir.stage then commit: the part holds the staged bytes, the commit
    record their size and SHA-256, staging is empty; a failed commit deletes the
    staged file."""
    import hashlib

    from aces_fast import _commit

    rd = ResultsDir(tmp_path / "o", tmp_path / "o.errors.jsonl")
    rd.begin({"method": "x"}, resume=False, restart=False)
    data = b"PAR1 not really parquet PAR1"
    part = rd.stage(data)
    assert part.path.read_bytes() == data and part.size == len(data)
    rd.commit(part, 3, ("a", "c"), np.arange(3), [], np.empty(0, np.int64))
    (c,) = rd.commits
    assert (tmp_path / "o" / c.part).read_bytes() == data
    assert (c.bytes, c.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert not list((tmp_path / "o" / "_aces_fast" / "staging").iterdir())
    bad = rd.stage(data)

    def no_log(*args):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(_commit, "_atomic_json", no_log)  # the commit record fails
    with pytest.raises(OSError, match="Input/output"):
        rd.commit(bad, 1, ("d", "d"), np.arange(3, 4), [], np.empty(0, np.int64))
    monkeypatch.undo()
    assert not bad.path.exists() and len(rd.commits) == 1
    assert not list((tmp_path / "o" / "_aces_fast" / "staging").iterdir())
    rd.close(complete=False)


def test_a_changed_input_refuses_to_resume(tmp_path, monkeypatch):
    path = _dataset(tmp_path)
    out = tmp_path / "o.parquet"
    _partial(path, out, monkeypatch)
    save_parquet(
        labelled_problems(600, seed=1), path, row_group_size=100
    )  # same ids, other matrices
    with pytest.raises(ValueError, match="the input changed since this run began .*--restart"):
        rerank_dataset(path, out, "aces-c", batch_size=100, resume=True)
    assert main(["rerank-dataset", str(path), "-o", str(out), "--resume", "-q"]) == 1
    s = rerank_dataset(path, out, "aces-c", batch_size=100, restart=True)
    assert (s.resumed, s.written) == (0, 600)
    assert_exactly_once(out, _clean(path, tmp_path / "new"), _input_ids(path))


def test_a_fresh_run_ranks_while_its_input_is_hashed(tmp_path, monkeypatch):
    """The input's SHA-256 is awaited at the first commit, not before the
    ranking; the manifest then records it and a resume compares it."""
    import hashlib
    import threading

    from aces_fast import _commit, stream

    path = _dataset(tmp_path)
    ranked, seen = threading.Event(), []
    real_identity, real_rank = _commit.file_identity, stream.rerank_table

    def identity(paths):
        seen.append(ranked.wait(60))  # False: the ranking waited for the hash
        return real_identity(paths)

    def rank(*args, **kwargs):
        ranked.set()
        return real_rank(*args, **kwargs)

    monkeypatch.setattr(_commit, "file_identity", identity)
    monkeypatch.setattr(stream, "rerank_table", rank)
    out = tmp_path / "o.parquet"
    _partial(path, out, monkeypatch)
    assert seen == [True]
    header = json.loads((out / "_aces_fast" / "manifest.json").read_text())["header"]
    (got,) = header["input"]
    assert got["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert got["size"] == path.stat().st_size
    s = rerank_dataset(path, out, "aces-c", batch_size=100, resume=True)
    assert (s.resumed, s.written) == (200, 400) and seen == [True, True]
    assert_exactly_once(out, _clean(path, tmp_path), _input_ids(path))


def test_a_failed_input_hash_fails_the_run_before_any_commit(tmp_path, monkeypatch):
    from aces_fast import _commit

    path = _dataset(tmp_path)

    def unreadable(paths):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(_commit, "file_identity", unreadable)
    out = tmp_path / "o.parquet"
    with pytest.raises(OSError, match="Input/output error"):
        rerank_dataset(path, out, "aces-c", batch_size=100)
    assert not out.exists()  # created by the run, nothing committed: removed
    out.mkdir()
    with pytest.raises(OSError, match="Input/output error"):
        rerank_dataset(path, out, "aces-c", batch_size=100)
    assert not _parts(out)  # parts staged meanwhile are never committed ...
    monkeypatch.undo()
    assert rerank_dataset(path, out, "aces-c", batch_size=100).written == 600
    assert not list((out / "_aces_fast" / "staging").iterdir())  # ... and go with the next run


def test_a_run_stopped_before_its_input_was_hashed_left_a_new_directory(tmp_path):
    """Its manifest says ``"input": null`` and no commit: the next run starts
    fresh, with or without --resume, and files in it are not taken for a run."""
    from concurrent.futures import Future

    path = _dataset(tmp_path)
    out, errs = tmp_path / "o.parquet", tmp_path / "o.errors.jsonl"
    out.mkdir()
    rd = ResultsDir(out, errs)
    rd.begin({"method": "aces-c"}, resume=False, restart=False, identity=Future())
    manifest = json.loads((out / "_aces_fast" / "manifest.json").read_text())
    assert manifest["header"]["input"] is None and manifest["commits"] == []
    rd.close(complete=False)  # as a kill would: the hash never finished
    (out / "data.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="holds files but no commit record"):
        rerank_dataset(path, out, "aces-c", resume=True)
    (out / "data.csv").unlink()
    s = rerank_dataset(path, out, "aces-c", batch_size=100, resume=True)
    assert (s.resumed, s.written) == (0, 600)
    header = json.loads((out / "_aces_fast" / "manifest.json").read_text())["header"]
    assert header["input"][0]["size"] == path.stat().st_size


def test_a_full_disk_at_the_first_manifest_is_reported_and_retried(tmp_path, monkeypatch):
    """The manifest that records the input's identity fails like any commit
    step: a DiskFullError naming the directory, nothing committed, and the
    next commit writes it."""
    from concurrent.futures import Future

    from aces_fast import _commit

    out = tmp_path / "o"
    rd = ResultsDir(out, tmp_path / "o.errors.jsonl")
    identity: Future = Future()
    rd.begin({"method": "x"}, resume=False, restart=False, identity=identity)
    identity.set_result([{"path": "/in.parquet", "name": "in.parquet", "size": 1, "sha256": "0"}])
    real = _commit._atomic_json

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_commit, "_atomic_json", full)
    part = rd.stage(b"PAR1 x PAR1")
    with pytest.raises(_commit.DiskFullError, match="no space left on the device"):
        rd.commit(part, 1, ("a", "a"), np.arange(1), [], np.empty(0, np.int64))
    assert rd.commits == [] and not part.path.exists()
    header = json.loads((out / "_aces_fast" / "manifest.json").read_text())["header"]
    assert header["input"] is None
    monkeypatch.setattr(_commit, "_atomic_json", real)
    rd.commit(rd.stage(b"PAR1 y PAR1"), 1, ("a", "a"), np.arange(1), [], np.empty(0, np.int64))
    header = json.loads((out / "_aces_fast" / "manifest.json").read_text())["header"]
    assert header["input"][0]["name"] == "in.parquet" and len(rd.commits) == 1
    rd.close(complete=True)


def test_resume_refuses_other_settings(tmp_path, monkeypatch):
    path = _dataset(tmp_path)
    out = tmp_path / "o.parquet"
    _partial(path, out, monkeypatch)
    with pytest.raises(ValueError, match="written with backend 'cpp', this run has 'numpy'"):
        rerank_dataset(path, out, "aces-c", backend="numpy", resume=True)
    with pytest.raises(ValueError, match="bad rows are in .*resume with --errors"):
        rerank_dataset(path, out, "aces-c", resume=True, errors_path=tmp_path / "e.jsonl")
    with pytest.raises(ValueError, match="resume and restart exclude each other"):
        rerank_dataset(path, out, "aces-c", resume=True, restart=True)
    with pytest.raises(SystemExit) as info:  # a usage error
        main(["rerank-dataset", str(path), "-o", str(out), "--resume", "--restart"])
    assert info.value.code == 2


def test_a_run_that_committed_nothing_leaves_nothing(tmp_path, monkeypatch):
    path = _dataset(tmp_path)
    bad = tmp_path / "bad.parquet"
    table = pq.read_table(path)
    n = table.column("n").to_pylist()
    n[0] = 0
    pq.write_table(table.set_column(1, "n", pa.array(n, pa.int32())), bad)
    out = tmp_path / "o.parquet"
    with pytest.raises(InvalidRowError, match="row 0"):
        rerank_dataset(bad, out)
    assert not out.exists()  # no empty output folder behind a failed run
    out.mkdir()  # the operator made it: it stays, and a run that commits nothing ...
    _partial(path, out, monkeypatch, commits=0)
    assert out.exists() and not _parts(out)
    s = rerank_dataset(path, out, "aces-c", batch_size=100)  # ... needs no --resume
    assert s.written == 600


def test_an_unreadable_manifest_refuses_to_resume(tmp_path, monkeypatch):
    path = _dataset(tmp_path)
    out = tmp_path / "o.parquet"
    _partial(path, out, monkeypatch)
    manifest = out / "_aces_fast" / "manifest.json"
    manifest.write_text(manifest.read_text()[:40])
    with pytest.raises(ValueError, match="manifest.json: unreadable commit record .*--restart"):
        rerank_dataset(path, out, "aces-c", batch_size=100, resume=True)
    with pytest.warns(UserWarning, match="not a part of this output"):  # parts it cannot vouch for
        rerank_dataset(path, out, "aces-c", batch_size=100, restart=True)
    assert_exactly_once(out, _clean(path, tmp_path), _input_ids(path))


def test_resume_reads_only_what_is_left(tmp_path, monkeypatch):
    """Skipping finished rows is a range check: whole row groups are not read."""
    path = _dataset(tmp_path, count=1000, row_group_size=100)
    out = tmp_path / "o.parquet"
    _partial(path, out, monkeypatch, commits=7)  # rows 0..699 done
    calls = []
    real = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        calls.append(kwargs.get("row_groups"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    s = rerank_dataset(path, out, "aces-c", batch_size=100, resume=True)
    assert (s.resumed, s.written) == (700, 300)
    assert calls == [[7], [8], [9]]
    calls.clear()
    s = rerank_dataset(path, out, "aces-c", batch_size=100, resume=True)
    assert (s.resumed, s.written, calls) == (1000, 0, [])


# -- the input -------------------------------------------------------------------


def test_duplicate_task_ids_in_the_input(tmp_path):
    probs = labelled_problems(30)
    probs[12] = Problem("t3", probs[12].B, probs[12].labels)
    probs[20] = Problem("t3", probs[20].B, probs[20].labels)
    probs[25] = Problem("t7", probs[25].B, probs[25].labels)
    path = tmp_path / "dup.parquet"
    save_parquet(probs, path, row_group_size=8)
    out = tmp_path / "o.parquet"
    with pytest.raises(
        InvalidRowError,
        match=r"row 12 \(task_id 't3'\): duplicate task_id: it "
        "already names row 3",
    ):
        rerank_dataset(path, out, batch_size=5)
    assert not out.exists()  # refused before anything was written
    s = rerank_dataset(path, out, batch_size=5, skip_invalid=True)
    assert (s.written, s.invalid) == (27, 3)
    recs = assert_valid_errors_file(s.errors_path, [12, 20, 25])
    assert [r["task_id"] for r in recs] == ["t3", "t3", "t7"]
    tids = pq.read_table(out).column("task_id").to_pylist()
    assert sorted(tids) == sorted({p.task_id for p in probs})


def _flip_in_value(path, needle: bytes):
    """Flip one bit inside the bytes ``needle`` where they occur in the file."""
    data = bytearray(path.read_bytes())
    pos = data.find(needle)
    assert pos > 0 and data.find(needle, pos + 1) < 0
    data[pos + len(needle) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def test_flipped_bytes_that_still_decode_are_detected(tmp_path):
    """Uncompressed pages: a flipped bit still decodes (to another matrix); the
    page checksum that save_parquet writes catches it."""
    probs = labelled_problems(400, n=10, m=64)
    path = tmp_path / "in.parquet"
    save_parquet(probs, path, row_group_size=100, compression="none")
    clean = _clean(path, tmp_path)
    _flip_in_value(path, pack_rows(probs[250].B))
    unchecked = pq.ParquetFile(path, page_checksum_verification=False).read_row_group(2)
    assert unchecked.column("task_id")[50].as_py() == "t250"  # decodes, silently changed
    assert unchecked.column("B")[50].as_py() != pack_rows(probs[250].B)
    out = tmp_path / "o.parquet"
    with pytest.raises(
        ValueError,
        match=r"in.parquet: row group 2 \(rows 200 to 299, task_ids "
        r"'t200' to 't299'\) is damaged: .*--skip-invalid",
    ):
        rerank_dataset(path, out, batch_size=64)
    from aces_fast.datasets import load_dataset

    with pytest.raises(ValueError, match=r"in.parquet: row group 2 \(rows 200 to 299"):
        load_dataset(str(path))
    s = rerank_dataset(path, out, batch_size=64, skip_invalid=True, restart=True)
    assert (s.written, s.invalid) == (300, 100)
    recs = assert_valid_errors_file(s.errors_path, range(200, 300))
    assert recs[0]["task_id"] == "t200" and "row group 2" in recs[0]["reason"]
    assert _plain(pq.read_table(out)).equals(
        clean.filter(
            pa.array([not 200 <= int(t[1:]) < 300 for t in clean.column("task_id").to_pylist()])
        )
    )


def test_flipped_bytes_that_do_not_decode_name_the_row_group(tmp_path, capsys):
    """A file written without page checksums (another tool): a damaged page header
    breaks decoding; the error names the file, row group, rows and ids."""
    probs = labelled_problems(400, n=10, m=64)
    path = tmp_path / "in.parquet"
    table = pa.Table.from_pylist(
        [{"task_id": p.task_id, "n": p.n, "m": p.m, "B": pack_rows(p.B)} for p in probs]
    )
    pq.write_table(table, path, row_group_size=100, compression="zstd")
    md = pq.ParquetFile(path).metadata
    col = md.row_group(1).column(3)  # B of row group 1
    data = bytearray(path.read_bytes())
    start = col.data_page_offset  # the page header: the page cannot be decoded
    data[start : start + 12] = b"\xff" * 12
    path.write_bytes(bytes(data))
    out = tmp_path / "o.parquet"
    assert main(["rerank-dataset", str(path), "-o", str(out), "--batch-size", "64"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert (
        f"aces-fast: error: {path}: row group 1 (rows 100 to 199, task_ids 't100' to "
        "'t199') is damaged: " in err
    )
    s = rerank_dataset(path, out, batch_size=64, skip_invalid=True, resume=True)
    assert s.invalid == 100 and s.resumed == 64  # the batch committed before the failure
    assert_valid_errors_file(s.errors_path, range(100, 200))
    tids = pq.read_table(out).column("task_id").to_pylist()
    assert sorted(tids) == sorted(f"t{i}" for i in range(400) if not 100 <= i < 200)


# -- the disk ------------------------------------------------------------------------


@contextlib.contextmanager
def _small_disk(root: Path, size_kb: int):
    """A tmpfs of ``size_kb`` at ``root`` when this process may mount (root), else
    ``None`` (the caller injects ENOSPC instead)."""
    root.mkdir()
    if (
        os.geteuid() != 0
        or shutil.which("mount") is None
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(root)],
            capture_output=True,
        ).returncode
        != 0
    ):
        yield None
        return
    try:
        yield lambda kb: subprocess.run(
            ["mount", "-o", f"remount,size={kb}k", str(root)], check=True
        )
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


def _bad_rows_dataset(tmp_path, count=600, every=7):
    probs = labelled_problems(count, n=30, m=40)
    sch = schema(test_count=False)
    sch = pa.schema([f.with_nullable(True) for f in sch], metadata=sch.metadata)
    rows = []
    for i, p in enumerate(probs):
        rows.append(
            {
                "task_id": p.task_id,
                "n": -1 if i % every == 3 else p.n,
                "m": p.m,
                "B": pack_rows(p.B),
                "labels": p.labels.tolist(),
            }
        )
    path = tmp_path / "bad.parquet"
    pq.write_table(
        pa.Table.from_pylist(rows, schema=sch), path, row_group_size=100, write_page_checksum=True
    )
    return path, [i for i in range(count) if i % every == 3]


def test_a_full_disk_names_the_path_and_resumes(tmp_path, monkeypatch, capsys):
    path, bad = _bad_rows_dataset(tmp_path)
    clean_dir = tmp_path / "clean"
    rerank_dataset(path, clean_dir, "aces-c", skip_invalid=True)
    clean = _plain(pq.read_table(clean_dir))
    with _small_disk(tmp_path / "disk", 256) as grow:
        out = tmp_path / "disk" / "o.parquet"
        errs = tmp_path / "disk" / "o.errors.jsonl"
        args = [
            "rerank-dataset",
            str(path),
            "-o",
            str(out),
            "--batch-size",
            "50",
            "--skip-invalid",
            "-q",
        ]
        if grow is None:  # not root: the disk fills after the third commit
            real = ResultsDir.commit
            count = [0]

            def full(self, *a, **k):
                count[0] += 1
                if count[0] > 3:
                    raise OSError(errno.ENOSPC, "No space left on device")
                return real(self, *a, **k)

            monkeypatch.setattr(ResultsDir, "commit", full)
        assert main(args) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert err.startswith("aces-fast: error: ") and "no space left on the device" in err
        assert "--resume" in err and str(tmp_path / "disk") in err
        if grow is None:
            monkeypatch.undo()
        else:
            grow(20000)
        assert main([*args, "--resume"]) == 0
        assert_exactly_once(out, clean, [f"t{i}" for i in range(600) if i not in bad])
        assert_valid_errors_file(errs, bad)


_KILL_IN_ERRORS = """
import os, sys
from aces_fast._commit import ResultsDir
real = ResultsDir._append_errors
count = [0]
def append(self, lines):
    count[0] += 1
    if count[0] == int(sys.argv[1]):
        data = "".join(l + "\\n" for l in lines).encode()
        with open(self.errors_path, "ab") as fh:
            fh.write(data[: len(data) // 2 + 5])
        os._exit(137)  # as kill -9 in the middle of the write
    return real(self, lines)
ResultsDir._append_errors = append
from aces_fast.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_kill_while_writing_the_errors_file(tmp_path):
    path, bad = _bad_rows_dataset(tmp_path)
    out = tmp_path / "o.parquet"
    args = [
        "rerank-dataset",
        str(path),
        "-o",
        str(out),
        "--batch-size",
        "50",
        "--skip-invalid",
        "-q",
    ]
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_IN_ERRORS, "4", *args], capture_output=True, text=True
    )
    assert proc.returncode == 137, proc.stderr
    errs = default_errors_path(out)
    assert not errs.read_bytes().endswith(b"\n")  # the kill cut a line
    assert main([*args, "--resume"]) == 0
    recs = assert_valid_errors_file(errs, bad)
    assert all(r["reason"] == "n is -1; need n >= 1 candidates" for r in recs)
    clean_dir = tmp_path / "clean"
    rerank_dataset(path, clean_dir, "aces-c", skip_invalid=True)
    assert_exactly_once(out, _plain(pq.read_table(clean_dir)))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="finds the errors file by /proc")
def test_a_full_disk_while_writing_the_errors_file(tmp_path, monkeypatch):
    """The disk fills in the middle of an errors-file append: the run stops with the
    message, and the file is cut back to its committed, valid lines at once."""
    path, bad = _bad_rows_dataset(tmp_path)
    out = tmp_path / "o.parquet"
    real_write = os.write
    calls = [0]

    def write(fd, data):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == "o.errors.jsonl":
            calls[0] += 1
            if calls[0] == 3:  # half a line lands, then the disk is full
                real_write(fd, bytes(data)[: len(data) // 2 + 5])
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(OSError, match="o.errors.jsonl: no space left on the device .*--resume"):
        rerank_dataset(path, out, batch_size=50, skip_invalid=True)
    monkeypatch.undo()
    errs = default_errors_path(out)
    assert_valid_errors_file(errs, bad[:14])  # two committed batches of 7 bad rows
    s = rerank_dataset(path, out, batch_size=50, skip_invalid=True, resume=True)
    assert s.resumed == 100
    assert_valid_errors_file(errs, bad)


def test_an_edited_errors_file_refuses_to_resume(tmp_path, monkeypatch):
    path, _ = _bad_rows_dataset(tmp_path)
    out = tmp_path / "o.parquet"
    undo = stop_after(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        rerank_dataset(path, out, batch_size=50, skip_invalid=True)
    undo()
    errs = default_errors_path(out)
    errs.write_text(errs.read_text()[:-30])
    with pytest.raises(ValueError, match="errors file does not hold what this run committed"):
        rerank_dataset(path, out, batch_size=50, skip_invalid=True, resume=True)


# -- signals -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow_input(tmp_path_factory):
    """6000 problems that take seconds with ACES-O on one thread: batches of
    1500 (``_slow_args``), about 1.2 s each on this project's machine, so that a
    signal sent within 0.3 s of the lock lands in the first batch even on a
    host twice as fast (250-problem batches took 0.2 s and made that flaky)."""
    path = tmp_path_factory.mktemp("slow") / "in.parquet"
    write_synthetic(path, 6000, 30, 40, seed=4, row_group_size=750)
    return path


@pytest.fixture(scope="module")
def slow_clean(slow_input, tmp_path_factory):
    out = tmp_path_factory.mktemp("slowclean") / "o"
    rerank_dataset(slow_input, out, "aces-o", n_threads=1)
    return _plain(pq.read_table(out))


def _slow_args(path, out):
    return [
        "rerank-dataset",
        path,
        "-o",
        out,
        "--method",
        "aces-o",
        "--batch-size",
        "1500",
        "--threads",
        "1",
        "-q",
    ]


def test_ctrl_c_during_the_first_batch(tmp_path, slow_input, slow_clean):
    rng = random.Random(7)
    for trial in range(3):
        out = tmp_path / f"o{trial}"
        proc = _start(_slow_args(slow_input, out))
        try:
            _wait_for(lambda out=out: (out / "_aces_fast" / "lock").exists(), proc)
            time.sleep(rng.uniform(0.0, 0.3))
            assert not _parts(out)
        except BaseException:
            proc.kill()  # no run left behind to disturb the next tests
            proc.communicate()
            raise
        tick = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - tick < 1.0
        assert proc.returncode == 130
        assert (
            err.strip()
            .splitlines()[-1]
            .startswith(f"aces-fast: interrupted; the results in {out} are complete up to the last")
        )
        if _parts(out):  # a batch was committed after all: the lock is released
            assert not (out / "_aces_fast" / "lock").read_text()
        else:  # nothing committed: the folder the run made is gone again
            assert not out.exists()
    proc = _start([*_slow_args(slow_input, out), "--resume"])
    assert proc.communicate(timeout=300)[0] == "" and proc.returncode == 0
    assert_exactly_once(out, slow_clean)


@pytest.mark.slow
def test_ctrl_c_at_random_moments(tmp_path, slow_input):
    """Twenty Ctrl-Cs from the interpreter's start to mid-run: each stops the
    command within a second, exit 130, one line, never ignored."""
    rng = random.Random(11)
    for trial in range(20):
        out = tmp_path / f"o{trial}"
        proc = _start(_slow_args(slow_input, out))
        time.sleep(rng.uniform(0.05, 1.5))
        if proc.poll() is not None:  # finished first: nothing to interrupt
            assert proc.returncode == 0
            continue
        tick = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - tick < 1.0, trial
        assert proc.returncode in (130, -signal.SIGINT), (trial, err)
        if proc.returncode == 130:  # -SIGINT: the interpreter's own start-up, before us
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("aces-fast: interrupted"), err


def _kill_chain(tmp_path, slow_input, slow_clean, kills, seed):
    rng = random.Random(seed)
    out = tmp_path / "o.parquet"
    for k in range(kills):
        proc = _start(_slow_args(slow_input, out) + (["--resume"] if k else []))
        _wait_for(lambda: (out / "_aces_fast" / "lock").exists(), proc)
        time.sleep(rng.uniform(0.2, 1.5))
        proc.kill()
        proc.communicate(timeout=30)
        if proc.returncode == 0:
            break
    proc = _start([*_slow_args(slow_input, out), "--resume"])
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert_exactly_once(out, slow_clean)
    assert not list((out / "_aces_fast" / "staging").iterdir())


def test_sigkill_then_resume(tmp_path, slow_input, slow_clean):
    _kill_chain(tmp_path, slow_input, slow_clean, kills=2, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_sigkill_chains(tmp_path, slow_input, slow_clean, seed):
    _kill_chain(tmp_path, slow_input, slow_clean, kills=5, seed=seed)


def test_ctrl_c_while_the_command_line_starts():
    """Before main() runs (the package's imports), a Ctrl-C is one line and exit 130."""
    code = (
        "import os, signal, sys\n"
        "sys.argv[0] = '/usr/bin/aces-fast'\n"
        "import aces_fast.cli\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "import time; time.sleep(5)\n"
        "print('not interrupted')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", "aces-fast: interrupted\n")
    # once main() runs, a Ctrl-C is Python's KeyboardInterrupt again (handled per command)
    code = (
        "import signal, sys\n"
        "sys.argv[0] = 'aces-fast'\n"
        "from aces_fast.cli import main\n"
        "assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler\n"
        "main(['config', '--json'])\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_dataset_commands_spare_the_lazy_pandas_import():
    """pyarrow's first conversion imports pandas inside a Cython function that
    swallows a Ctrl-C; the dataset commands make that look-up find no pandas."""
    code = (
        "import sys\n"
        "from aces_fast.cli import _arrow_without_pandas\n"
        "_arrow_without_pandas()\n"
        "import pyarrow as pa\n"
        "pa.array([1, 2]); pa.scalar(3)\n"
        "assert 'pandas' not in sys.modules\n"
        "print(type(pa.table({'a': [1]}).to_pandas()).__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    if importlib.util.find_spec("pandas") is not None:
        assert proc.stdout.strip() == "DataFrame"  # an explicit to_pandas() still works
