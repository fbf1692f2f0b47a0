"""`make run`: the whole of Memento on one machine, with no external services and no API keys.

Unless the environment points at an existing PostgreSQL / Redis, it starts an embedded PostgreSQL (with
pgvector) and an embedded Valkey, applies the migrations, runs the five services as child processes on
loopback ports, prints how to connect, and watches them until Ctrl-C. Everything it keeps (database,
cache, generated secrets, logs) lives in the data dir, MEMENTO_DATA_DIR or ./.memento, so a restart finds
the same memories and the same access key.

Every failure ends with one line on stderr and exit code 1, never a traceback. Whatever was started is
stopped on every path: in try/finally here, and by the kernel's parent-death signal should this process be
killed outright (see memento_devtools.embedded.spawn).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from memento_devtools.embedded import (
    LOOPBACK,
    EmbeddedError,
    EmbeddedPostgres,
    EmbeddedValkey,
    free_port,
    port_is_free,
    shared_buffers_mb,
    spawn,
    start_postgres,
    start_valkey,
    stop_processes,
)

DEFAULT_PORT = 56332
DEFAULT_DATA_DIR = "./.memento"
DATABASE_NAME = "memento"
APP_ROLE = "memento_app"  # `memento_shared.db.migrate` creates it from DATABASE_URL's user and password

STARTUP_TIMEOUT_S = 90.0  # for all five services to answer /health
MIGRATE_TIMEOUT_S = 300.0
SERVICE_STOP_TIMEOUT_S = 10.0
HEALTH_POLL_S = 0.2
SUPERVISE_POLL_S = 0.5


@dataclass(frozen=True)
class Service:
    name: str
    argv: tuple[str, ...]  # run as [sys.executable, *argv]
    port_env: str  # the variable that tells the service its port
    # Background workers yield the CPU to the request path (gateway, memory-api, Postgres, Valkey): on a laptop
    # or a 2-core runner, a burst of evaluations must not slow down the writes that caused it. Not the embedder:
    # recall by text waits for its query embeddings (niced, its p50 rose from 32 to 45 ms and embedding lag
    # fivefold under the benchmark's load); it nices its own document process instead (embedder lanes.py).
    niceness: int = 0


# Start order: each phase starts at once and must be healthy before the next one starts. memory-api and
# embedder are what the others call; the gateway, the only public door, opens last.
SERVICE_PHASES: list[list[Service]] = [
    [
        Service("memory-api", ("-m", "memento_memory_api"), "MEMORY_API_PORT"),
        Service("embedder", ("-m", "memento_embedder"), "EMBEDDER_PORT"),
    ],
    [
        Service("evaluator", ("-m", "memento_evaluator"), "EVALUATOR_PORT", niceness=10),
        Service("consolidator", ("-m", "memento_consolidator"), "CONSOLIDATOR_PORT", niceness=10),
    ],
    [Service("gateway", ("-m", "memento_gateway"), "PORT")],
]
MIGRATE_ARGV: tuple[str, ...] = ("-m", "memento_shared.db.migrate")
# Unless MEMENTO_COHOST=0, the gateway's process hosts memory-api too (memento_devtools.cohost), started in the
# gateway's phase; memory-api keeps its port and its health check.
COHOST_ARGV: tuple[str, ...] = ("-m", "memento_devtools.cohost")
COHOSTED = {"memory-api": "gateway"}  # a service served by another's process

_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class LaunchError(Exception):
    """Ends the launcher: its message becomes the one line on stderr, and the exit code is 1."""


class _Stop(BaseException):
    """Raised in the main thread by SIGINT/SIGTERM.

    A BaseException, like KeyboardInterrupt, so no `except Exception` on the way (httpx, asyncpg...) eats it.
    """


# --------------------------------------------------------------------------------------------------
# signals


class _Signals:
    """SIGINT/SIGTERM interrupt whatever the main thread does, except while a child is being recorded."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._deferring = 0

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def ignore(self) -> None:
        # While stopping: a second Ctrl-C must not cut the cleanup short and leave servers running.
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)

    def _handle(self, signum: int, _frame: object) -> None:
        if self.received is not None:
            return
        self.received = signum
        if not self._deferring:
            raise _Stop(signum)

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold a signal back between starting a child and recording it, so no child goes untracked."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
        if self.received is not None and not self._deferring:
            raise _Stop(self.received)


# --------------------------------------------------------------------------------------------------
# data dir, lock, secrets


def _data_dir(environ: Mapping[str, str]) -> Path:
    path = Path(environ.get("MEMENTO_DATA_DIR") or DEFAULT_DATA_DIR).expanduser().resolve()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)  # 0700: it holds the secrets
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise LaunchError(
            f"data dir {path} is not writable ({exc.strerror or exc}); set MEMENTO_DATA_DIR to a writable folder"
        ) from None
    return path


def _lock(data_dir: Path) -> int:
    """Hold `<data>/memento.lock` for as long as we run: two launchers on one Postgres data dir corrupt it.

    flock is released by the kernel however this process ends, so a crash never leaves a stale lock.
    """
    path = data_dir / "memento.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise LaunchError(
            f"data dir {data_dir} is not writable ({exc.strerror}); set MEMENTO_DATA_DIR to a writable folder"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip()
        os.close(fd)
        pid = holder if holder.isdigit() else "unknown"
        raise LaunchError(
            f"another 'make run' (pid {pid}) is using data dir {data_dir}; stop it first or set MEMENTO_DATA_DIR"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _write_private(path: Path, text: str) -> None:
    """Write a 0600 file atomically: a reader never sees it half written or briefly world-readable."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, 0o600)  # in case an old .tmp with looser rights was reused
    os.replace(tmp, path)


class Secrets:
    """Passwords and keys generated on first use and kept in `<data>/secrets.json` (0600).

    Kept rather than regenerated because the embedded Postgres owner password is fixed at initdb, and the
    access key is what users paste into their MCP clients.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._values = self._load()

    def _load(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        try:
            values = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            raise LaunchError(f"cannot read {self.path} ({exc}); fix it, or move it away to start afresh") from None
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise LaunchError(f"{self.path} is not a JSON object of strings; fix it, or move it away to start afresh")
        if self.path.stat().st_mode & 0o077:
            self.path.chmod(0o600)
        return values

    def get(self, name: str) -> str:
        if name not in self._values:
            self._values[name] = secrets.token_urlsafe(32)
            _write_private(self.path, json.dumps(self._values, indent=2) + "\n")
        return self._values[name]


# --------------------------------------------------------------------------------------------------
# small helpers


def _say(message: str) -> None:
    print(f"memento: {message}", flush=True)


def _gateway_address(environ: Mapping[str, str]) -> tuple[str, int]:
    host = environ.get("MEMENTO_BIND_HOST") or LOOPBACK
    raw = environ.get("PORT") or str(DEFAULT_PORT)
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise LaunchError(f"PORT={raw!r} is not a port number (1-65535)")
    port = int(raw)
    try:
        free = port_is_free(host, port)
    except OSError as exc:
        raise LaunchError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); check MEMENTO_BIND_HOST") from None
    if not free:
        raise LaunchError(f"port {port} is already in use; stop what uses it or set PORT=<another port>")
    return host, port


def _connect_host(bind_host: str) -> str:
    """Where a client on this machine reaches a server bound to `bind_host`."""
    if bind_host in ("0.0.0.0", "::", "*", ""):
        return LOOPBACK
    return f"[{bind_host}]" if ":" in bind_host else bind_host


def _pick_port(taken: set[int]) -> int:
    """A free loopback port not handed out yet in this run (the kernel may offer the same one twice)."""
    while (port := free_port(LOOPBACK)) in taken:
        pass
    taken.add(port)
    return port


def _bypass_proxies_for_loopback(env: dict[str, str]) -> None:
    """The services call each other on 127.0.0.1; a proxy set in the user's shell must not catch that."""
    if not any(env.get(name) for name in _PROXY_VARS):
        return
    for name in ("NO_PROXY", "no_proxy"):
        hosts = [h.strip() for h in env.get(name, "").split(",") if h.strip()]
        env[name] = ",".join(hosts + [h for h in (LOOPBACK, "localhost") if h not in hosts])


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        with suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def _last_log_line(log_path: Path, since: int) -> str:
    """The last non-empty line the child wrote (after byte `since`), as ' (…)', or ''."""
    try:
        with open(log_path, "rb") as log:
            log.seek(max(since, log.seek(0, os.SEEK_END) - 4096))
            lines = [line.strip() for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    if not lines:
        return ""
    line = lines[-1] if len(lines[-1]) <= 160 else lines[-1][:157] + "..."
    return f" ({line})"


def _settings():  # -> memento_shared.settings.OperatorSettings
    """The database and Redis settings, to derive DSNs exactly as the services would from POSTGRES_*/DB_*/REDIS_*;
    every service's own settings are validated first, so a bad variable stops the launch before anything starts."""
    from memento_consolidator.settings import ConsolidatorSettings
    from memento_embedder.settings import EmbedderSettings
    from memento_evaluator.settings import EvaluatorSettings
    from memento_gateway.settings import GatewaySettings
    from memento_memory_api.settings import MemoryApiSettings
    from memento_shared.settings import OperatorSettings

    try:
        for service in (GatewaySettings, MemoryApiSettings, EmbedderSettings, EvaluatorSettings, ConsolidatorSettings):
            service()
        return OperatorSettings()
    except ValueError as exc:  # pydantic's ValidationError: multi-line, so keep the first problem
        errors = getattr(exc, "errors", lambda: [])()
        first = errors[0] if errors else {"loc": ("?",), "msg": str(exc).splitlines()[0]}
        raise LaunchError(f"invalid setting {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _healthy(client, url: str) -> bool:
    import httpx

    try:
        return client.get(url).status_code == 200
    except httpx.HTTPError:
        return False


# --------------------------------------------------------------------------------------------------
# the launcher


class Launcher:
    """Everything one `make run` started, so that `shutdown` can stop exactly that, in order."""

    def __init__(self, environ: Mapping[str, str], signals: _Signals) -> None:
        self.environ = dict(environ)
        self.signals = signals
        self.data_dir: Path | None = None
        self.logs: Path | None = None
        self.run_json: Path | None = None
        self.lock_fd: int | None = None
        self.postgres: EmbeddedPostgres | None = None
        self.valkey: EmbeddedValkey | None = None
        self.children: dict[str, subprocess.Popen[bytes]] = {}  # services (and migrate while it runs)
        self.hosts: dict[str, str] = {}  # a service run inside another's process (MEMENTO_COHOST): its host
        self.log_offsets: dict[str, int] = {}
        self.ports: dict[str, int] = {}
        self.env: dict[str, str] = {}  # what the services were started with (bench.cluster restarts them with it)

    # ---- start ----

    def start(self) -> None:
        self.data_dir = _data_dir(self.environ)
        self.lock_fd = _lock(self.data_dir)
        self.run_json = self.data_dir / "run.json"
        self.run_json.unlink(missing_ok=True)  # we hold the lock, so any run.json is from a run that died
        bind_host, gateway_port = _gateway_address(self.environ)
        self.logs = self.data_dir / "logs"
        self.logs.mkdir(mode=0o700, exist_ok=True)
        store = Secrets(self.data_dir / "secrets.json")

        taken = {gateway_port}
        env = self._base_env(store)
        env.update(self._database(store, taken))
        env.update(self._redis(store, taken))
        self._migrate(env)
        # Only the migrations get the schema owner's DSN; the services log in as the role RLS applies to.
        env.pop("MIGRATION_DATABASE_URL", None)

        self.ports = {svc.name: _pick_port(taken) for phase in SERVICE_PHASES for svc in phase if svc.name != "gateway"}
        self.ports["gateway"] = gateway_port
        env.update({svc.port_env: str(self.ports[svc.name]) for phase in SERVICE_PHASES for svc in phase})
        env["MEMORY_API_URL"] = f"http://{LOOPBACK}:{self.ports['memory-api']}"
        env["EMBEDDER_URL"] = f"http://{LOOPBACK}:{self.ports['embedder']}"
        self.env = env
        self._start_services(env, bind_host)
        self._announce(env, bind_host)

    def _base_env(self, store: Secrets) -> dict[str, str]:
        env = dict(self.environ)
        env["MEMENTO_DATA_DIR"] = str(self.data_dir)
        env["MEMENTO_ACCESS_KEY"] = self.environ.get("MEMENTO_ACCESS_KEY") or store.get("access_key")
        env["MEMENTO_INTERNAL_SECRET"] = self.environ.get("MEMENTO_INTERNAL_SECRET") or store.get("internal_secret")
        env["PYTHONUNBUFFERED"] = "1"  # so a crash's last words are in its log file
        _bypass_proxies_for_loopback(env)
        return env

    def _database(self, store: Secrets, taken: set[int]) -> dict[str, str]:
        if any(self.environ.get(name) for name in ("DATABASE_URL", "POSTGRES_HOST", "DB_HOST")):
            settings = _settings()
            _say("using the PostgreSQL named in the environment")
            return {"DATABASE_URL": settings.database_url, "MIGRATION_DATABASE_URL": settings.migration_database_url}

        pgdata = self.data_dir / "pg"
        first_run = not (pgdata / "PG_VERSION").exists()
        _say(f"starting PostgreSQL in {pgdata}" + (" (first run: creating it)" if first_run else ""))
        owner_password = store.get("postgres_owner_password")
        try:
            self.postgres = start_postgres(
                pgdata,
                port=_pick_port(taken),
                owner_password=owner_password,
                log_path=self.logs / "postgres.log",
                settings={"shared_buffers": f"{shared_buffers_mb()}MB"},
            )
            self.postgres.create_database(DATABASE_NAME)
        except EmbeddedError as exc:
            raise LaunchError(str(exc)) from None
        return {
            "DATABASE_URL": self.postgres.url(APP_ROLE, store.get("postgres_app_password"), DATABASE_NAME),
            "MIGRATION_DATABASE_URL": self.postgres.url("postgres", owner_password, DATABASE_NAME),
        }

    def _redis(self, store: Secrets, taken: set[int]) -> dict[str, str]:
        if any(self.environ.get(name) for name in ("REDIS_URL", "REDIS_HOST")):
            _say("using the Redis named in the environment")
            return {"REDIS_URL": _settings().redis_url}

        _say(f"starting Valkey in {self.data_dir / 'valkey'}")
        try:
            self.valkey = start_valkey(
                self.data_dir / "valkey",
                port=_pick_port(taken),
                password=store.get("valkey_password"),
                log_path=self.logs / "valkey.log",
            )
        except EmbeddedError as exc:
            raise LaunchError(str(exc)) from None
        return {"REDIS_URL": self.valkey.url}

    def _spawn(
        self, name: str, argv: tuple[str, ...], env: Mapping[str, str], niceness: int = 0
    ) -> subprocess.Popen[bytes]:
        log_path = self.logs / f"{name}.log"
        self.log_offsets[name] = log_path.stat().st_size if log_path.exists() else 0
        with self.signals.deferred():
            self.children[name] = spawn([sys.executable, *argv], log_path=log_path, env=env, niceness=niceness)
        return self.children[name]

    def _migrate(self, env: Mapping[str, str]) -> None:
        _say("applying database migrations")
        process = self._spawn("migrate", MIGRATE_ARGV, env)
        log_path = self.logs / "migrate.log"
        try:
            code = process.wait(MIGRATE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise LaunchError(f"migrations did not finish within {MIGRATE_TIMEOUT_S:.0f} s; see {log_path}") from None
        del self.children["migrate"]
        if code != 0:
            last = _last_log_line(log_path, self.log_offsets["migrate"])
            raise LaunchError(f"migrations failed ({_exit_reason(code)}){last}; see {log_path}")

    def _start_services(self, env: dict[str, str], bind_host: str) -> None:
        import httpx

        self.hosts = dict(COHOSTED) if cohosting(self.environ) else {}
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        with httpx.Client(trust_env=False, timeout=2.0) as client:
            for phase in SERVICE_PHASES:
                spawned = [svc for svc in phase if svc.name not in self.hosts]
                guests = [name for name, host in self.hosts.items() if host in {svc.name for svc in spawned}]
                _say("starting " + ", ".join([svc.name for svc in spawned] + guests))
                for svc in spawned:
                    # Only the gateway is public; the internal services stay on loopback whatever the bind host.
                    host = bind_host if svc.name == "gateway" else LOOPBACK
                    argv = COHOST_ARGV if svc.name in self.hosts.values() else svc.argv
                    self._spawn(svc.name, argv, env | {"MEMENTO_BIND_HOST": host}, svc.niceness)
                self._wait_healthy([svc.name for svc in spawned] + guests, client, deadline, bind_host)

    def _health_url(self, name: str, bind_host: str) -> str:
        host = _connect_host(bind_host) if name == "gateway" else LOOPBACK
        return f"http://{host}:{self.ports[name]}/health"

    def _wait_healthy(self, names: list[str], client, deadline: float, bind_host: str) -> None:
        pending = list(names)
        while pending:
            for name in list(pending):
                self._check_alive(name, "while starting")
                if _healthy(client, self._health_url(name, bind_host)):
                    pending.remove(name)
            if pending and time.monotonic() > deadline:
                name = pending[0]
                raise LaunchError(
                    f"{name} did not answer {self._health_url(name, bind_host)} within {STARTUP_TIMEOUT_S:.0f} s"
                    f"; see {self.logs / (name + '.log')}"
                )
            if pending:
                time.sleep(HEALTH_POLL_S)

    def _check_alive(self, name: str, when: str) -> None:
        name = self.hosts.get(name, name)
        code = self.children[name].poll()
        if code is not None:
            log_path = self.logs / f"{name}.log"
            last = _last_log_line(log_path, self.log_offsets[name])
            raise LaunchError(f"{name} stopped {when} ({_exit_reason(code)}){last}; see {log_path}")

    def _announce(self, env: Mapping[str, str], bind_host: str) -> None:
        base = f"http://{_connect_host(bind_host)}:{self.ports['gateway']}"
        mcp_url, health_url = f"{base}/mcp", f"{base}/health"
        info = {
            "pid": os.getpid(),
            "mcp_url": mcp_url,
            "health_url": health_url,
            "gateway_port": self.ports["gateway"],
            "ports": self.ports,
            "database_url": env["DATABASE_URL"],
            "redis_url": env["REDIS_URL"],
            "logs": str(self.logs),
        }
        _write_private(self.run_json, json.dumps(info, indent=2) + "\n")
        key = env["MEMENTO_ACCESS_KEY"]
        client_config = {
            "mcpServers": {"memento": {"type": "http", "url": mcp_url, "headers": {"Authorization": f"Bearer {key}"}}}
        }
        banner = [
            "",
            "Memento is running.",
            f"  MCP URL:     {mcp_url}",
            f"  Access key:  {key}",
            f"  Health:      {health_url}",
            f"  Data dir:    {self.data_dir}",
            f"  Logs:        {self.logs}",
            "",
            "MCP client configuration:",
            json.dumps(client_config, indent=2),
            "",
            "Press Ctrl-C to stop.",
        ]
        print("\n".join(banner), flush=True)

    # ---- run ----

    def supervise(self) -> None:
        """Wait for Ctrl-C (raised as _Stop); a server that dies on its own ends the run (LaunchError)."""
        servers = {"postgres": self.postgres, "valkey": self.valkey}
        while True:
            for name in self.children:
                self._check_alive(name, "unexpectedly")
            for name, server in servers.items():
                if server is not None and not server.running:
                    raise LaunchError(f"{name} stopped unexpectedly; see {server.log_path}")
            time.sleep(SUPERVISE_POLL_S)

    # ---- stop ----

    def shutdown(self) -> None:
        """Stop services, then Valkey, then Postgres (the services need both until they are gone)."""
        _quietly(self._stop_children)  # in parallel, SIGTERM then SIGKILL after SERVICE_STOP_TIMEOUT_S
        if self.valkey is not None:
            _quietly(self.valkey.stop, 30)
        if self.postgres is not None:
            _quietly(self.postgres.stop, 60)
        if self.run_json is not None:
            _quietly(self.run_json.unlink, missing_ok=True)
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # releases the flock; the file stays so its inode stays the lock
            self.lock_fd = None

    def _stop_children(self) -> None:
        killed = stop_processes(list(self.children.values()), sig=signal.SIGTERM, timeout=SERVICE_STOP_TIMEOUT_S)
        for name, process in self.children.items():
            if process in killed:  # a shutdown bug in that service: say so rather than just being slow
                print(
                    f"memento: {name} did not stop within {SERVICE_STOP_TIMEOUT_S:.0f} s of SIGTERM and was killed; "
                    f"see {self.logs / (name + '.log')}",
                    file=sys.stderr,
                    flush=True,
                )

    def report_unexpected(self, exc: BaseException) -> str:
        """A one-line message for a bug; the traceback goes to logs/launcher.log rather than the terminal."""
        where = ""
        if self.logs is not None and self.logs.is_dir():
            log_path = self.logs / "launcher.log"
            with suppress(OSError), open(log_path, "a") as log:
                log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}\n")
                traceback.print_exception(exc, file=log)
            where = f"; details in {log_path}"
        return f"unexpected error: {type(exc).__name__}: {exc}{where}"


def cohosting(environ: Mapping[str, str]) -> bool:
    """MEMENTO_COHOST: memory-api inside the gateway's process unless it says 0/false/no/off (issue 50: the hop
    between them cost ~1 ms of CPU a call over loopback HTTP; bench/README.md)."""
    return environ.get("MEMENTO_COHOST", "").strip().lower() not in {"0", "false", "no", "off"}


def _quietly(action, *args, **kwargs) -> None:
    """Run one shutdown step; a failure is reported and the remaining steps still run."""
    try:
        action(*args, **kwargs)
    except Exception as exc:
        print(f"memento: while stopping: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def _run(launcher: Launcher, signals: _Signals) -> int:
    error: str | None = None
    try:
        launcher.start()
        launcher.supervise()
    except _Stop:
        _say("stopping")
    except LaunchError as exc:
        error = str(exc)
    except Exception as exc:
        error = launcher.report_unexpected(exc)
    finally:
        signals.ignore()
        if error is not None:
            print(f"memento: {error}", file=sys.stderr, flush=True)
        launcher.shutdown()
    if error is None:
        _say("stopped")
    return 0 if error is None else 1


def main() -> int:
    signals = _Signals()
    signals.install()
    launcher = Launcher(os.environ, signals)
    try:
        return _run(launcher, signals)
    except _Stop:  # a signal that landed in the instant between an error and the cleanup; cleanup has run
        return 1


if __name__ == "__main__":
    sys.exit(main())
