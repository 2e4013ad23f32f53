"""The Ray Data engine (aces_fast.ray) on a local two-CPU cluster: results
bit-identical to the local engine. One quick end-to-end test runs by default; the
heavier ones are marked slow."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pyarrow")
ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

import pyarrow as pa
import pyarrow.parquet as pq

import aces_fast as af
import aces_fast.ray as afray
from aces_fast.datasets import load_dataset
from aces_fast.parquet import InvalidRowError, save_parquet
from aces_fast.stream import rerank_dataset
from test_stream import FAST_O, _start, _wait_for_parts, _with_bad_rows, assert_results_equal


@pytest.fixture(scope="module")
def cluster():
    started = afray.init(num_cpus=2)
    yield
    if started:
        afray.shutdown()


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """The first 40 bundled CodeGen problems, row groups of 8 (five read tasks)."""
    ds = load_dataset("humaneval-codegen16b")
    path = tmp_path_factory.mktemp("ray") / "small.parquet"
    save_parquet(ds.problems[:40], path, row_group_size=8)
    return path, ds.problems[:40]


def _plain(table):
    return table.sort_by("task_id").replace_schema_metadata(None)


def test_ray_engine_equals_local_engine(cluster, small, tmp_path):
    path, problems = small
    local = tmp_path / "local"
    rerank_dataset(path, local, "aces-c", batch_size=6)
    s = rerank_dataset(path, tmp_path / "ray", "aces-c", engine="ray", batch_size=6)
    assert (s.engine, s.rows, s.written, s.invalid) == ("ray", 40, 40, 0)
    got = pq.read_table(tmp_path / "ray")
    assert _plain(got).equals(_plain(pq.read_table(local)))
    # a part per batch, however large Ray's blocks (the unit of commits and resumes)
    sizes = [pq.read_metadata(f).num_rows for f in (tmp_path / "ray").glob("part-*.parquet")]
    assert sum(sizes) == 40 and max(sizes) <= 6, sizes
    assert (
        json.loads(got.schema.metadata[b"aces_fast"])["backend"] == "cpp"
        or "cpp" not in af.available_backends()
    )
    # the public API on a Dataset from Ray's own Parquet reader gives the same rows
    ds = afray.rerank_dataset(ray.data.read_parquet(str(path)), "aces-c", batch_size=6)
    table = pa.concat_tables(ds.iter_batches(batch_format="pyarrow", batch_size=None))
    assert _plain(table).equals(_plain(pq.read_table(local)).cast(table.schema))
    order = {t: i for i, t in enumerate(table.column("task_id").to_pylist())}
    idx = [order[p.task_id] for p in problems]
    assert_results_equal(table.take(idx), problems, af.rerank_batch([p.B for p in problems]))


def test_ray_engine_damaged_row_group_and_duplicates(cluster, tmp_path):
    """A row group failing its page checksum and a duplicate task id: reported as
    the local engine reports them (an error naming the row group, or bad rows
    with --skip-invalid), and the rest ranked equally."""
    from aces_fast.datasets import Problem
    from aces_fast.parquet import pack_rows

    rng = np.random.default_rng(5)
    probs = [Problem(f"t{i}", (rng.random((10, 64)) < 0.5).astype(np.uint8)) for i in range(60)]
    probs[45] = Problem("t3", probs[45].B)
    path = tmp_path / "in.parquet"
    save_parquet(probs, path, row_group_size=20, compression="none")
    data = bytearray(path.read_bytes())
    needle = pack_rows(probs[27].B)
    data[data.find(needle) + len(needle) // 2] ^= 0x10  # row group 1 fails its CRC
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"row 45 \(task_id 't3'\): duplicate task_id"):
        rerank_dataset(path, tmp_path / "r0", engine="ray", batch_size=8)
    fixed = [p for i, p in enumerate(probs) if i != 45]  # without the duplicate
    path2 = tmp_path / "in2.parquet"
    save_parquet(fixed, path2, row_group_size=20, compression="none")
    data = bytearray(path2.read_bytes())
    data[data.find(needle) + len(needle) // 2] ^= 0x10
    path2.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"in2.parquet: row group 1 \(rows 20 to 39"):
        rerank_dataset(path2, tmp_path / "r1", engine="ray", batch_size=8)
    outs = {}
    for engine in ("local", "ray"):
        s = rerank_dataset(
            path,
            tmp_path / engine,
            engine=engine,
            batch_size=8,
            skip_invalid=True,
            errors_path=tmp_path / f"{engine}.jsonl",
        )
        assert (s.written, s.invalid) == (39, 21)
        errs = sorted(
            (json.loads(x)["row"], json.loads(x)["task_id"], json.loads(x)["reason"])
            for x in (tmp_path / f"{engine}.jsonl").read_text().splitlines()
        )
        outs[engine] = (_plain(pq.read_table(tmp_path / engine)), errs)
    assert outs["ray"][0].equals(outs["local"][0])
    assert outs["ray"][1] == outs["local"][1]
    assert [e[0] for e in outs["ray"][1]] == [*list(range(20, 40)), 45]


@pytest.mark.slow
@pytest.mark.parametrize(("method", "params"), [("aces-o", FAST_O), ("codet", {}), ("b4", {})])
def test_ray_engine_other_methods(cluster, small, tmp_path, method, params):
    path, _problems = small
    rerank_dataset(path, tmp_path / "local", method, batch_size=7, **params)
    rerank_dataset(
        path, tmp_path / "ray", method, engine="ray", batch_size=7, n_threads=2, **params
    )
    assert _plain(pq.read_table(tmp_path / "ray")).equals(_plain(pq.read_table(tmp_path / "local")))


@pytest.mark.slow
def test_ray_engine_bad_rows(cluster, tmp_path):
    path, _good = _with_bad_rows(tmp_path)
    with pytest.raises(InvalidRowError, match=r"row (3|7|10) \(task_id 't(3|7|10)'\)"):
        rerank_dataset(path, tmp_path / "o1", engine="ray", batch_size=4)
    s = rerank_dataset(path, tmp_path / "o2", engine="ray", batch_size=4, skip_invalid=True)
    assert (s.written, s.invalid) == (12, 3)
    lines = sorted(
        (json.loads(x) for x in s.errors_path.read_text().splitlines()), key=lambda e: e["row"]
    )
    assert [(e["task_id"], e["row"]) for e in lines] == [("t3", 3), ("t7", 7), ("t10", 10)]
    rerank_dataset(path, tmp_path / "o3", skip_invalid=True)
    assert _plain(pq.read_table(tmp_path / "o2")).equals(_plain(pq.read_table(tmp_path / "o3")))
    # the public API with skip_invalid marks bad rows instead of dropping them
    out = afray.rerank_dataset(afray.read_pass_matrices(path), skip_invalid=True)
    table = pa.concat_tables(out.iter_batches(batch_format="pyarrow", batch_size=None))
    bad = table.filter(table.column("error").is_valid()).sort_by("row")
    assert bad.column("row").to_pylist() == [3, 7, 10]
    assert bad.column("order").null_count == 3


@pytest.mark.slow
def test_ray_engine_resume(cluster, tmp_path):
    ds = load_dataset("humaneval-gpt35")
    path = tmp_path / "gpt.parquet"
    save_parquet(ds, path, row_group_size=20)
    full = tmp_path / "full"
    rerank_dataset(path, full, "aces-o", **FAST_O)
    part = tmp_path / "part"
    rerank_dataset(path, part, "aces-o", batch_size=50, **FAST_O)
    for f in sorted(part.glob("part-*.parquet"))[2:]:
        f.unlink()  # an operator deletes committed parts: resume warns and redoes them
    with pytest.warns(UserWarning, match="committed part is missing; its rows are ranked again"):
        s = rerank_dataset(path, part, "aces-o", engine="ray", resume=True, batch_size=16, **FAST_O)
    assert (s.resumed, s.written) == (100, 64)
    assert _plain(pq.read_table(part)).equals(_plain(pq.read_table(full)))


@pytest.mark.slow
def test_worker_errors_arrive_as_one_message(cluster, tmp_path):
    path, _ = _with_bad_rows(tmp_path)
    out = afray.rerank_dataset(afray.read_pass_matrices(path, batch_size=4))
    with pytest.raises(ray.exceptions.RayError) as info:
        out.materialize()
    # Ray keeps the worker's exception as text only; the driver recovers its message
    assert afray._task_error(info.value) in [
        "row 3 (task_id 't3'): labels entry 2 is 7; only 0 and 1 are allowed",
        (
            "row 7 (task_id 't7'): B has 9 bytes, but n x m = 5 x 11 packed by row needs "
            "n * ceil(m / 8) = 10"
        ),
        "row 10 (task_id 't10'): n is -5; need n >= 1 candidates",
    ]
    with pytest.raises(ValueError, match="^unknown backend 'nope'"):
        rerank_dataset(path, tmp_path / "o", engine="ray", backend="nope")
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_cli_ray_engine_starts_its_own_cluster(small, tmp_path):
    path, problems = small
    out = tmp_path / "o.parquet"
    code = "import sys\nfrom aces_fast.cli import main\nsys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "rerank-dataset",
            str(path),
            "-o",
            str(out),
            "--engine",
            "ray",
            "--batch-size",
            "5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["written"] == 40
    ref = af.rerank_batch([p.B for p in problems])
    table = pq.read_table(out)
    order = {t: i for i, t in enumerate(table.column("task_id").to_pylist())}
    assert_results_equal(table.take([order[p.task_id] for p in problems]), problems, ref)
    assert np.all(np.isfinite(table.column("pass@1").to_numpy()))


@pytest.mark.slow
def test_cli_ray_engine_interrupted_and_resumed(tmp_path):
    import signal

    from benchmarks.harness.stream_scale import write_synthetic

    path = tmp_path / "in.parquet"
    write_synthetic(path, 2000, 30, 40, seed=2, row_group_size=100)
    out = tmp_path / "o.parquet"
    args = [
        "rerank-dataset",
        path,
        "-o",
        out,
        "--engine",
        "ray",
        "--method",
        "aces-o",
        "--batch-size",
        "50",
    ]
    proc = _start(args)
    _wait_for_parts(out, proc, count=1, timeout=300)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "rerun with --resume" in err
    kept = pq.read_table(out).num_rows
    assert 0 < kept < 2000
    proc = _start([*args, "--resume", "-q"])
    _, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    done = pq.read_table(out)
    assert sorted(done.column("task_id").to_pylist()) == sorted(f"task/{i}" for i in range(2000))
    rerank_dataset(path, tmp_path / "local", "aces-o")
    assert _plain(done).equals(_plain(pq.read_table(tmp_path / "local")))
