"""The Ray engine as operators run it: ``--engine ray`` owns a private local
cluster (whatever RAY_ADDRESS or other clusters say) and leaves no process or
file behind, however the run ends; a two-node cluster started with ``ray start``
as the README says; Ray failures as one line; worker and driver kills, then
``--resume``.

Every cluster here is started with one CPU per node and under a temporary root
of its own, so the processes a test started are exactly those naming that root
or holding a file under it (found through /proc, hence Linux only); each test
removes them in any case.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

import pyarrow.parquet as pq
from benchmarks.harness.stream_scale import write_synthetic

import aces_fast.ray as afray
from aces_fast.stream import rerank_dataset
from test_stream import _wait_for_parts, _with_bad_rows

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="finds a cluster's processes through /proc"
)

_RUN = "import sys\nfrom aces_fast.cli import main\nsys.exit(main(sys.argv[1:]))"
_RAY = str(Path(sys.executable).with_name("ray"))
ONE_CPU = json.dumps({"CPU": 1})


# ---------------------------------------------------------------------------
# helpers


def _holders(root: str) -> list[int]:
    """Live processes (not this one) naming ``root`` in their command line or
    holding a file open under it."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if root.encode() in fh.read():
                    found.append(int(entry))
                    continue
            for fd in os.listdir(f"/proc/{entry}/fd"):
                try:
                    if os.readlink(f"/proc/{entry}/fd/{fd}").startswith(root):
                        found.append(int(entry))
                        break
                except OSError:
                    continue
        except OSError:  # gone meanwhile, or a zombie
            continue
    return found


def _kill_all(root: str) -> list[int]:
    """SIGKILL every process under ``root`` (a test's last resort); returns them."""
    killed = []
    for _ in range(5):
        pids = _holders(root)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
        time.sleep(0.5)
    return killed


def _wait_gone(root: str, timeout: float = 60) -> list[int]:
    """Wait until no process is under ``root``; the ones still there at the end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = _holders(root)
        if not left:
            return []
        time.sleep(0.3)
    return _holders(root)


def _names(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{pid} {cmd[:80]}")
        except OSError:
            pass
    return out


@pytest.fixture
def root():
    """A short temporary directory (Ray's socket paths must stay under ~107
    bytes, so not pytest's tmp_path); whatever runs under it is killed at the end."""
    path = tempfile.mkdtemp(prefix="afr-", dir="/tmp")
    yield path
    _kill_all(path)
    shutil.rmtree(path, ignore_errors=True)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(key, None)
    env.update(extra)
    return env


def _cli(args, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _RUN, *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _start_cli(args, env) -> subprocess.Popen:
    # its own session: a SIGINT sent to its group is what Ctrl-C at a terminal does
    return subprocess.Popen(
        [sys.executable, "-c", _RUN, *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _plain(path):
    return pq.read_table(path).sort_by("task_id").replace_schema_metadata(None)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """600 synthetic problems (row groups of 100) and the local engine's results."""
    d = tmp_path_factory.mktemp("rayops")
    path = d / "in.parquet"
    write_synthetic(path, 600, 30, 40, seed=3, row_group_size=100)
    rerank_dataset(path, d / "local.parquet", "aces-c")
    return path, _plain(d / "local.parquet")


# ---------------------------------------------------------------------------
# the default suite: owning a local cluster, and failures as one line


def test_engine_ray_owns_a_private_cluster_and_removes_it(data, root, tmp_path):
    """RAY_ADDRESS names a port where nothing listens: joining it (what
    ``ray.init()`` without an address does) would hang; the run must start its
    own cluster instead, under RAY_TMPDIR, and leave nothing there."""
    path, local = data
    out = tmp_path / "o.parquet"
    env = _env(
        RAY_ADDRESS=f"127.0.0.1:{_closed_port()}", RAY_TMPDIR=root, RAY_OVERRIDE_RESOURCES=ONE_CPU
    )
    proc = _cli(
        ["rerank-dataset", path, "-o", out, "--engine", "ray", "--batch-size", "50", "--json"],
        env,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["engine"], summary["written"]) == ("ray", 600)
    assert _plain(out).equals(local)
    # shutdown waits for the guard: nothing of the cluster is left when the CLI exits
    assert _holders(root) == []
    assert os.listdir(root) == []


def test_unreachable_address_is_one_line_naming_ray(data, tmp_path):
    path, _ = data
    port = _closed_port()
    for args, env in [
        (["--address", f"127.0.0.1:{port}"], _env()),
        (["--address", "auto"], _env(RAY_ADDRESS=f"127.0.0.1:{port}")),
    ]:
        tick = time.monotonic()
        proc = _cli(
            ["rerank-dataset", path, "-o", tmp_path / "o.parquet", "--engine", "ray", *args],
            env,
            timeout=120,
        )
        assert proc.returncode == 1
        assert proc.stderr.splitlines() == [
            (
                f"aces-fast: error: Ray: nothing answers at 127.0.0.1:{port} (Connection refused): "
                f"start the head there with 'ray start --head --port {port}', or check the "
                "address and that the port is reachable from here"
            )
        ], proc.stderr
        assert time.monotonic() - tick < 60  # ray.init alone retries for over ten minutes
    assert not ray.is_initialized()
    with pytest.raises(afray.RayEngineError, match="^Ray: nothing answers at"):
        rerank_dataset(path, tmp_path / "o2.parquet", engine="ray", address=f"localhost:{port}")
    with pytest.raises(ValueError, match="num_cpus applies only to a new local cluster"):
        afray.init(address="auto", num_cpus=1)
    with pytest.raises(ValueError, match="address must be"):
        afray.init(address=" ")


def test_connection_failures_name_the_likely_cause(monkeypatch):
    """The cause Ray buries two exceptions down becomes the one line."""

    def failed(inner: str) -> BaseException:
        try:
            try:
                raise RuntimeError(f"Failed to connect to GCS. Last connection error: {inner}")
            except RuntimeError as exc:
                raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379") from exc
        except ConnectionError as exc:
            return exc

    auth = failed("ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: ...")
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    msg = str(afray._connect_error(auth, "10.0.0.1:6379"))
    assert msg.startswith(
        "Ray: the cluster at 10.0.0.1:6379 uses token authentication and "
        "this process sent no token (RAY_AUTH_MODE is unset here): set "
        "RAY_AUTH_MODE=token here and on every node"
    )
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert "refused this process's token" in str(afray._connect_error(auth, "10.0.0.1:6379"))
    other = failed("ray.exceptions.RpcError: Timed out")
    assert str(afray._connect_error(other, "10.0.0.1:6379")) == (
        "Ray: cannot connect to the cluster at 10.0.0.1:6379: Failed to connect to Ray "
        "cluster at 10.0.0.1:6379"
    )
    assert "\n" not in msg
    # failures while the job runs: a task's ValueError stays one, the rest is Ray's
    lost = afray._run_error(RuntimeError("object lost\nsecond line"))
    assert isinstance(lost, afray.RayEngineError)
    assert str(lost) == "Ray: the run failed: RuntimeError: object lost"


# ---------------------------------------------------------------------------
# slow: every way out of an owned cluster, kills, and a real two-node cluster


@pytest.mark.slow
def test_ctrl_c_and_errors_leave_no_cluster_behind(data, root, tmp_path):
    _path, _ = data
    env = _env(RAY_TMPDIR=root, RAY_OVERRIDE_RESOURCES=ONE_CPU)
    # Ctrl-C at a terminal: SIGINT to the whole foreground process group
    big = tmp_path / "big.parquet"
    write_synthetic(big, 6000, 30, 40, seed=4, row_group_size=500)
    out = tmp_path / "o.parquet"
    proc = _start_cli(
        [
            "rerank-dataset",
            big,
            "-o",
            out,
            "--engine",
            "ray",
            "--method",
            "aces-o",
            "--batch-size",
            "100",
        ],
        env,
    )
    _wait_for_parts(out, proc)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "rerun with --resume" in err
    assert _names(_holders(root)) == [] and os.listdir(root) == []
    # an error (a bad row, found by a worker) ends the run the same way
    bad, _ = _with_bad_rows(tmp_path)
    proc = _cli(
        ["rerank-dataset", bad, "-o", tmp_path / "o2.parquet", "--engine", "ray"], env, timeout=180
    )
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("aces-fast: error: ") and "(task_id 't" in proc.stderr
    assert _names(_holders(root)) == [] and os.listdir(root) == []


def _worker_pids(root: str, title: str) -> list[int]:
    pids = []
    for pid in _holders(root):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if fh.read().startswith(title.encode()):
                    pids.append(pid)
        except OSError:
            pass
    return pids


@pytest.mark.slow
def test_worker_kills_and_a_driver_kill_then_resume(root, tmp_path):
    big = tmp_path / "big.parquet"
    write_synthetic(big, 6000, 30, 40, seed=5, row_group_size=500)
    rerank_dataset(big, tmp_path / "local.parquet", "aces-o")
    local = _plain(tmp_path / "local.parquet")
    env = _env(RAY_TMPDIR=root, RAY_OVERRIDE_RESOURCES=ONE_CPU)
    args = ["--engine", "ray", "--method", "aces-o", "--batch-size", "100", "-q"]

    # Ray retries the tasks of a killed worker: the run still gives every result
    out = tmp_path / "w.parquet"
    proc = _start_cli(["rerank-dataset", big, "-o", out, *args], env)
    killed: list[int] = []
    deadline = time.monotonic() + 180
    while len(killed) < 2 and proc.poll() is None and time.monotonic() < deadline:
        for pid in _worker_pids(root, "ray::MapBatches"):
            if pid not in killed:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                time.sleep(1.0)
                break
        time.sleep(0.05)
    _, err = proc.communicate(timeout=300)
    assert len(killed) == 2, "no ranking worker was seen to kill"
    assert proc.returncode == 0, err
    assert _plain(out).equals(local)
    assert _holders(root) == [] and os.listdir(root) == []

    # SIGKILL of the driver itself: the guard removes the cluster, --resume finishes
    out = tmp_path / "d.parquet"
    proc = _start_cli(["rerank-dataset", big, "-o", out, *args], env)
    _wait_for_parts(out, proc)
    assert _holders(root), "the cluster should be running now"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert _names(_wait_gone(root, timeout=60)) == []
    assert os.listdir(root) == []
    kept = pq.read_table(out).num_rows
    assert 0 < kept < 6000
    proc = _start_cli(["rerank-dataset", big, "-o", out, "--resume", *args], env)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    done = pq.read_table(out)
    ids = done.column("task_id").to_pylist()
    assert len(ids) == 6000 and len(set(ids)) == 6000
    assert _plain(out).equals(local)
    assert _holders(root) == [] and os.listdir(root) == []


def _ports(n: int) -> list[int]:
    """``n`` consecutive free TCP ports."""
    import random

    for _ in range(200):
        base = random.randint(20000, 40000)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("", p))
            return list(range(base, base + n))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


class _Node:
    """One ``ray start --block`` in its own session: stopping it is SIGTERM to that
    process (which stops its children), then SIGKILL of whatever of its process
    group or temporary root is left."""

    def __init__(self, args: list[str], temp_dir: str, env: dict[str, str], log: Path):
        self.temp_dir, self.log = temp_dir, log
        with open(log, "wb") as fh:
            self.proc = subprocess.Popen(
                [
                    _RAY,
                    "start",
                    *args,
                    f"--temp-dir={temp_dir}",
                    "--disable-usage-stats",
                    "--block",
                ],
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_started(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "Ray runtime started" in self.log.read_text(errors="replace"):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail(f"ray start failed:\n{self.log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> list[int]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        return _kill_all(self.temp_dir)

    def ran(self) -> set:
        """The names of the tasks this node's workers ran (Ray writes
        ``:task_name:NAME`` into each worker's log when a task starts)."""
        names = set()
        for f in Path(self.temp_dir).glob("session_*/logs/worker-*.out"):
            for line in f.read_text(errors="replace").splitlines():
                if line.startswith(":task_name:"):
                    names.add(line[len(":task_name:") :])
        return names


@pytest.mark.slow
def test_two_node_cluster_as_the_readme_starts_it(data, root):
    """The README's recipe on one machine: a token (as any earlier local
    ``ray.init()`` leaves one), RAY_AUTH_MODE=token on every node and the driver,
    ``ray start --head``, ``ray start --address`` with its own ports, one CPU each;
    then ``rerank-dataset --engine ray --address``."""
    path, local = data
    home = os.path.join(root, "home")
    os.makedirs(home)
    base = _env(HOME=home)
    token = subprocess.run(
        [_RAY, "get-auth-token", "--generate"], env=base, capture_output=True, text=True, timeout=60
    )
    assert token.returncode == 0 and (Path(home) / ".ray" / "auth_token").exists(), token.stderr
    # a head stopped by SIGTERM drains for 30 s by default; nothing here needs that
    env = dict(base, RAY_AUTH_MODE="token", RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="5")
    p = _ports(40)
    head_dir, worker_dir = os.path.join(root, "h"), os.path.join(root, "w")
    address = f"127.0.0.1:{p[0]}"

    def ports(q: list[int]) -> list[str]:
        return [
            f"--node-manager-port={q[0]}",
            f"--object-manager-port={q[1]}",
            f"--runtime-env-agent-port={q[2]}",
            f"--dashboard-agent-grpc-port={q[3]}",
            f"--dashboard-agent-listen-port={q[4]}",
            f"--metrics-export-port={q[5]}",
            f"--min-worker-port={q[6]}",
            f"--max-worker-port={q[6] + 12}",
            "--num-cpus=1",
        ]

    nodes: list[_Node] = []
    try:
        nodes.append(
            _Node(
                [
                    "--head",
                    f"--port={p[0]}",
                    f"--dashboard-port={p[2]}",
                    "--include-dashboard=false",
                    *ports(p[3:10]),
                ],
                head_dir,
                env,
                Path(root) / "head.log",
            )
        )
        nodes[0].wait_started()
        nodes.append(
            _Node(
                [f"--address={address}", *ports(p[20:27])],
                worker_dir,
                env,
                Path(root) / "worker.log",
            )
        )
        nodes[1].wait_started()

        # without RAY_AUTH_MODE the driver sends no token: one line saying so, at once
        tick = time.monotonic()
        proc = _cli(
            [
                "rerank-dataset",
                path,
                "-o",
                Path(root) / "x.parquet",
                "--engine",
                "ray",
                "--address",
                address,
            ],
            base,
            timeout=120,
        )
        assert proc.returncode == 1
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith(
            f"aces-fast: error: Ray: the cluster at {address} uses "
            "token authentication and this process sent no token"
        )
        assert time.monotonic() - tick < 30

        out = Path(root) / "o.parquet"
        proc = _cli(
            [
                "rerank-dataset",
                path,
                "-o",
                out,
                "--engine",
                "ray",
                "--address",
                address,
                "--batch-size",
                "20",
                "--json",
            ],
            env,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["written"] == 600
        assert _plain(out).equals(local)
        # The cluster's nodes ran the ranking, not the driver. Which node runs
        # which of the 30 short tasks is Ray's choice (in 2 of 5 runs on the
        # 2-core machine one node's logs named none of them), so the test asks
        # for it on some node; a worker writes its task names to its log a
        # moment after the task, hence the wait.
        deadline = time.monotonic() + 10
        ran = [node.ran() for node in nodes]
        while not all("MapBatches(_rerank_block)" in r for r in ran):
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
            ran = [node.ran() for node in nodes]
        assert any("MapBatches(_rerank_block)" in r for r in ran), ran
        # the driver started nothing of its own and left the cluster running
        assert all(n.proc.poll() is None for n in nodes)
    finally:
        for node in reversed(nodes):
            node.stop()
    assert _holders(root) == []
