"""A real `espalier serve` for the integration tests: a temporary database with the demo data,
on a free 127.0.0.1 port, stopped after the tests. The binary is `$ESPALIER_BIN`, or the
workspace's `target/debug/espalier` (`cargo build -p espalier`)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# How long a server may take to start answering /v1/health.
START_TIMEOUT = 30.0


def espalier_bin() -> Path:
    path = Path(os.environ.get("ESPALIER_BIN") or ROOT / "target" / "debug" / "espalier")
    if not path.exists():
        pytest.fail(f"no espalier binary at {path}: run `cargo build -p espalier` or set ESPALIER_BIN")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """One `espalier serve` process on its own database (demo schema and data)."""

    def __init__(self, *flags: str, tokens: dict[str, str] | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="espalier-pytest-"))
        self.db = self.dir / "db"
        self.flags = list(flags)
        # name -> role; the secret is derived from the name so tests can use it.
        self.tokens = tokens or {}
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        subprocess.run(
            [str(espalier_bin()), "--db", str(self.db), "init", "--demo"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.start()

    @staticmethod
    def secret(name: str) -> str:
        return f"{name}-secret-0123456789"

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [
            str(espalier_bin()),
            "--db",
            str(self.db),
            "--durability",
            "none",
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            *self.flags,
        ]
        for name, role in self.tokens.items():
            args += ["--token", f"{name}:{role}:{self.secret(name)}"]
        self.log = open(self.dir / "server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"espalier serve exited with {self.proc.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(f"{self.http}/v1/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        pytest.fail(f"espalier serve did not answer /v1/health within {START_TIMEOUT} s:\n{self.output()}")

    def output(self) -> str:
        return (self.dir / "server.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.proc = None
        self.log.close()

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout=timeout)
        self.proc = None
        self.log.close()
        return code

    def exec_offline(self, instruction: str) -> None:
        """Runs an instruction on the database with the CLI while the server is stopped."""
        assert self.proc is None, "stop the server first"
        subprocess.run(
            [str(espalier_bin()), "--db", str(self.db), "exec", instruction],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def restart(self) -> None:
        self.stop()
        self.start()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A server with the default limits, no tokens (every session is admin)."""
    s = Server()
    yield s
    s.cleanup()


@pytest.fixture
def fresh_server() -> Iterator[Server]:
    """A server of one's own, for tests that restart or stop it."""
    s = Server("--history", "1000")
    yield s
    s.cleanup()
