"""A whole Memento system, started by the launcher's own code, whose components can each be killed with SIGKILL and
started again: PostgreSQL, Valkey, memory-api, embedder, evaluator, consolidator and two gateway replicas.

Used by bench.chaos, bench.soak and tests/e2e/test_chaos.py. Every component runs as a child process of the caller
(spawned from the thread that owns the Cluster, normally the main one: the kernel's parent-death signal follows
that thread), so a killed caller leaves nothing behind. A kill is `kill -9` of the component's process and of
everything under it (Postgres backends, the embedder's document process), as a lost container would.

    with Cluster(Path("/tmp/x")) as cluster:
        cluster.kill("memory-api"); cluster.restart("memory-api")
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil

from memento_devtools.embedded import LOOPBACK, free_port, shared_buffers_mb, start_postgres, start_valkey
from memento_devtools.launcher import SERVICE_PHASES, STARTUP_TIMEOUT_S, Launcher, Secrets, Service, _Signals

GATEWAYS = ("gateway", "gateway-2")
SERVICES = {svc.name: svc for phase in SERVICE_PHASES for svc in phase}
# the order bench.chaos injects faults in: the stores first, then the request path, then the workers
COMPONENTS = ("postgres", "valkey", "memory-api", *GATEWAYS, "embedder", "evaluator", "consolidator")


class ClusterError(RuntimeError):
    pass


class Cluster:
    """Start with `start()` (or `with`); `kill(name)` and `restart(name)` one component; `stop()` everything."""

    def __init__(self, data_dir: Path, env: Mapping[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        # the services apart (MEMENTO_COHOST=0): a fault kills memory-api alone, not the gateway with it
        environ = {**os.environ, "MEMENTO_DATA_DIR": str(self.data_dir), "PORT": str(free_port())}
        environ = {**environ, "MEMENTO_COHOST": "0", **(env or {})}
        self.launcher = Launcher(environ, _Signals())
        self.secrets: dict[str, str] = {}
        self.killed_at: dict[str, float] = {}

    # ---- start / stop ----

    def start(self) -> Cluster:
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the launcher's banner holds the access key
                self.launcher.start()
            second = SERVICES["gateway"]
            self.launcher.ports["gateway-2"] = free_port()
            self._start_service("gateway-2", second)
        except BaseException:
            self.stop()
            raise
        self.secrets = json.loads((self.data_dir / "secrets.json").read_text())
        return self

    def stop(self) -> None:
        self.launcher.shutdown()  # services (gateway-2 included: it is one of its children), Valkey, Postgres

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- what clients need ----

    @property
    def access_key(self) -> str:
        return self.launcher.env["MEMENTO_ACCESS_KEY"]

    @property
    def mcp_urls(self) -> list[str]:
        return [f"http://{LOOPBACK}:{self.launcher.ports[name]}/mcp" for name in GATEWAYS]

    @property
    def database_url(self) -> str:
        return self.launcher.env["DATABASE_URL"]

    @property
    def redis_url(self) -> str:
        return self.launcher.env["REDIS_URL"]

    def owner_url(self) -> str:
        """The schema owner's DSN (bypasses RLS): for checking what was stored, never used by the load."""
        parts = urlsplit(self.database_url)
        owner = f"postgres:{self.secrets['postgres_owner_password']}@{parts.hostname}:{parts.port}"
        return parts._replace(netloc=owner).geturl()

    def service_url(self, name: str) -> str:
        return f"http://{LOOPBACK}:{self.launcher.ports[name]}"

    # ---- faults ----

    def process(self, name: str) -> subprocess.Popen[bytes]:
        if name == "postgres":
            return self.launcher.postgres.process
        if name == "valkey":
            return self.launcher.valkey.process
        return self.launcher.children[name]

    def kill(self, name: str) -> None:
        """kill -9 the component and every process under it, and wait until all are gone. Postgres backends leave
        the postmaster's process group (setsid), hence the walk down the tree rather than a killpg."""
        process = self.process(name)
        tree = self.processes(name)
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        process.wait(30)  # reaped here; the others are reaped by their parent or init
        _, alive = psutil.wait_procs(tree, timeout=30)
        if alive:
            raise ClusterError(f"{name}: {len(alive)} processes still alive 30 s after SIGKILL")
        self.killed_at[name] = time.monotonic()

    def processes(self, name: str) -> list[psutil.Process]:
        """The component's process and everything under it."""
        try:
            root = psutil.Process(self.process(name).pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def restart(self, name: str) -> float:
        """Start a killed component again on its port, as it was; returns the seconds until it answered health."""
        started = time.monotonic()
        if name == "postgres":
            pg = self.launcher.postgres
            store = Secrets(self.data_dir / "secrets.json")
            self.launcher.postgres = start_postgres(
                pg.pgdata,
                port=pg.port,
                owner_password=store.get("postgres_owner_password"),
                log_path=pg.log_path,
                settings={"shared_buffers": f"{shared_buffers_mb()}MB"},  # as the launcher starts it
            )
        elif name == "valkey":
            vk = self.launcher.valkey
            self.launcher.valkey = start_valkey(vk.data_dir, port=vk.port, password=vk.password, log_path=vk.log_path)
        else:
            self._start_service(name, SERVICES["gateway" if name in GATEWAYS else name])
        return time.monotonic() - started

    def _start_service(self, name: str, svc: Service) -> None:
        env = self.launcher.env | {"MEMENTO_BIND_HOST": LOOPBACK, svc.port_env: str(self.launcher.ports[name])}
        self.launcher._spawn(name, svc.argv, env, svc.niceness)
        with httpx.Client(trust_env=False, timeout=2.0) as client:
            self.launcher._wait_healthy([name], client, time.monotonic() + STARTUP_TIMEOUT_S, LOOPBACK)

    # ---- memory ----

    def memory(self) -> dict[str, dict[str, float]]:
        """Per component, MiB summed over its processes: RSS, PSS (shared pages split among the processes mapping
        them) and USS (pages only it maps). Postgres's RSS counts the shared buffers once per backend."""
        out: dict[str, dict[str, float]] = {}
        for name in COMPONENTS:
            totals = {"rss": 0.0, "pss": 0.0, "uss": 0.0, "processes": 0}
            for proc in self.processes(name):
                try:
                    info = proc.memory_full_info()
                except psutil.Error:
                    continue
                totals["rss"] += info.rss / 2**20
                totals["pss"] += info.pss / 2**20
                totals["uss"] += info.uss / 2**20
                totals["processes"] += 1
            out[name] = {k: round(v, 1) for k, v in totals.items()}
        return out
