"""Real containers for the kit's tests: a Debian root file system built once with mmdebstrap, imported into
Docker (a dockerd the tests start when none runs) and Podman, and `run_in_container` to run a command in a
container of each engine's default security: its default seccomp profile and capabilities, not privileged,
`--network none`, no memory limit (the kit must bound memory itself), as root or as uid 1000.

No image is pulled.  The host's Python installation, the virtual environment and a copy of the checkout are
bind-mounted read-only where a course's image would hold them (Gradescope's layout):

    sys.base_prefix (the interpreter)   at the same path (the venv's pyvenv.cfg names it)
    sys.prefix (the virtual environment) at /opt/autograder-venv
    a copy of the checkout               at /autograder/source (no .git, .venv, build; test_containers.py
                                         mounts the unpacked Gradescope zip there in Docker as root)

`pip install -e .` left an editable finder in the venv that maps `autograder` to this checkout; a copy of it
that maps to /autograder/source is mounted over it, so every interpreter in the container (`-I` included)
imports the engine from /autograder/source, as `pip install -e /autograder/source` would have made it.

The packages come from `make containers` (a prerequisite of `make test`); a missing one fails the tests with
its name, never skips them.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from autograder import REPO_ROOT as REPO

BUILD = REPO / "build" / "containers"
LOCK = BUILD / ".lock"
# the tarball outlives the checkout, like pip's cache: a fresh clone on this machine does not build it again
# (the engines' images, named by the recipe's hash, outlive it too)
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "autograder-kit" / "containers"
DOCKERD_LOG = BUILD / "dockerd.log"
TIMINGS = BUILD / "timings.json"  # what the last build, daemon start and import took

# Debian package -> a file it installs that the harness uses (dpkg says whether the package is installed)
PACKAGES = {"docker.io": "/usr/sbin/dockerd", "podman": "/usr/bin/podman", "mmdebstrap": "/usr/bin/mmdebstrap",
            "runc": "/usr/sbin/runc"}
ENGINES = ("docker", "podman")
USERS = {"root": "0:0", "1000": "1000:1000"}

VENV = "/opt/autograder-venv"
SOURCE = "/autograder/source"
PYTHON = f"{VENV}/bin/python"

# What the root file system is made from; its hash names the cached tarball and the image, so editing the
# recipe rebuilds both.  The libraries are those the interpreter's extension modules link against (torch and
# the other wheels bring their own).  /root is made traversable for uid 1000, which must reach the host
# interpreter mounted under it; uid 1000 gets an account and a home, as a course image would give it.
RECIPE = {
    "version": 1,
    "suite": "bookworm",
    "variant": "minbase",
    "mirror": "http://deb.debian.org/debian",
    "include": ["libbz2-1.0", "libcrypt1", "libexpat1", "libffi8", "liblzma5", "libncursesw6", "libreadline8",
                "libsqlite3-0", "libssl3", "libstdc++6", "libuuid1", "zlib1g"],
    "customize_hooks": [
        'chmod 755 "$1/root"',
        'echo "grader:x:1000:1000:grader:/home/grader:/bin/sh" >> "$1/etc/passwd"',
        'echo "grader:x:1000:" >> "$1/etc/group"',
        'mkdir -p "$1/home/grader" && chown 1000:1000 "$1/home/grader"',
    ],
}


class HarnessError(AssertionError):
    """The container harness could not be set up: a test failure (with the reason), never a skip."""


def recipe_hash() -> str:
    return hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode()).hexdigest()[:16]


def image_name() -> str:
    return f"localhost/autograder-test-rootfs:{recipe_hash()}"


def _record_timing(name: str, seconds: float) -> None:
    try:
        timings = json.loads(TIMINGS.read_text())
    except (OSError, ValueError):
        timings = {}
    timings[name] = round(seconds, 2)
    TIMINGS.write_text(json.dumps(timings, indent=1, sort_keys=True) + "\n")


@contextlib.contextmanager
def _locked():
    """One xdist worker (or test run) at a time builds, starts and imports."""
    BUILD.mkdir(parents=True, exist_ok=True)
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- (a) the packages ---------------------------------------------------------------------------------------

def missing_packages() -> list[str]:
    missing = []
    for package, path in PACKAGES.items():
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
        if status.stdout.strip() != "install ok installed" or not os.path.exists(path):
            missing.append(package)
    return missing


def ensure_packages() -> None:
    if missing := missing_packages():
        raise HarnessError(f"the container tests need Debian's {', '.join(missing)}: run `make containers` "
                           f"(apt-get install {' '.join(missing)})")
    if os.geteuid() != 0:
        raise HarnessError("the container tests start dockerd and run rootful Podman: run them as root")


def docker_binary() -> str:
    # Debian's client, of the daemon's version (a newer client elsewhere on PATH also works, with a warning)
    return "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else shutil.which("docker") or "docker"


# --- (b) the root file system ---------------------------------------------------------------------------------

def rootfs() -> Path:
    """The tarball of the root file system, built once per recipe (90-180 s) and kept in CACHE."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tarball = CACHE / f"rootfs-{recipe_hash()}.tar"
    with _locked():
        if tarball.exists():
            return tarball
        partial = tarball.with_suffix(".partial.tar")
        partial.unlink(missing_ok=True)  # a build that was killed
        command = ["mmdebstrap", f"--variant={RECIPE['variant']}", "--include=" + ",".join(RECIPE["include"]),
                   *[f"--customize-hook={hook}" for hook in RECIPE["customize_hooks"]],
                   RECIPE["suite"], str(partial), RECIPE["mirror"]]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            raise HarnessError(f"mmdebstrap failed ({done.returncode}): {done.stderr[-3000:]}")
        partial.rename(tarball)
        _record_timing("rootfs_build_seconds", time.monotonic() - started)
        for old in CACHE.glob("rootfs-*.tar"):  # an older recipe's
            if old != tarball:
                old.unlink(missing_ok=True)
        return tarball


# --- (c) the engines ------------------------------------------------------------------------------------------

def _docker_answers() -> bool:
    try:
        return subprocess.run([docker_binary(), "info"], capture_output=True, timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def ensure_dockerd(timeout: float = 60) -> None:
    """A dockerd that answers on the default socket: the one running, or one started here with the default
    data root (/var/lib/docker), logging to build/containers/dockerd.log.  It is left running for later tests
    and test runs (a session's processes end with it)."""
    with _locked():
        if _docker_answers():
            return
        started = time.monotonic()
        env = {**os.environ, "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        with DOCKERD_LOG.open("ab") as log:
            daemon = subprocess.Popen(["/usr/sbin/dockerd"], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                      env=env, cwd="/", start_new_session=True, close_fds=True)
        while not _docker_answers():
            if daemon.poll() is not None or time.monotonic() - started > timeout:
                tail = DOCKERD_LOG.read_text(errors="replace")[-3000:]
                raise HarnessError(f"dockerd did not start (exit {daemon.poll()}); {DOCKERD_LOG}:\n{tail}")
            time.sleep(0.2)
        _record_timing("dockerd_start_seconds", time.monotonic() - started)


def _engine(engine: str) -> list[str]:
    if engine == "docker":
        return [docker_binary()]
    if engine == "podman":
        # runc, named: crun (Podman's first choice where installed) is reported to fail on hybrid cgroups like
        # this host's, and is not installed here
        return ["podman", "--runtime", "runc"]
    raise ValueError(engine)


def ensure_image(engine: str) -> str:
    """The root file system as `engine`'s image (imported once per recipe); returns its name."""
    ensure_packages()
    if engine == "docker":
        ensure_dockerd()
    name = image_name()

    def imported() -> bool:
        return subprocess.run([*_engine(engine), "image", "inspect", name], capture_output=True).returncode == 0

    with _locked():
        if imported():
            return name
    tarball = rootfs()  # only when an engine lacks the image: a machine that has both never builds it again
    with _locked():
        if imported():
            return name
        started = time.monotonic()
        done = subprocess.run([*_engine(engine), "import", str(tarball), name], capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0:
            raise HarnessError(f"{engine} import failed: {done.stderr[-2000:]}")
        _record_timing(f"{engine}_import_seconds", time.monotonic() - started)
        # an older recipe's image
        listed = subprocess.run([*_engine(engine), "images", "--format", "{{.Repository}}:{{.Tag}}"],
                                capture_output=True, text=True).stdout.split()
        for old in listed:
            if old.rsplit(":", 1)[0].endswith("autograder-test-rootfs") and old.rsplit(":", 1)[1] != recipe_hash():
                subprocess.run([*_engine(engine), "rmi", old], capture_output=True)
    return name


# --- what the containers see ----------------------------------------------------------------------------------

TOP_LEVEL_IGNORED = {".git", ".venv", "build", "out", ".pytest_cache"}
IGNORED_ANYWHERE = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")


def checkout_copy(target: Path) -> Path:
    """A copy of the working tree (what the tests test), without .git, the virtual environment and build/;
    world-readable, as a checkout is on a course's image (the sandbox, not the file modes, must hide it)."""
    def ignored(folder: str, names: list[str]) -> set[str]:
        return IGNORED_ANYWHERE(folder, names) | (TOP_LEVEL_IGNORED & set(names) if Path(folder) == REPO else set())
    shutil.copytree(REPO, target, ignore=ignored, symlinks=True)
    for path in [target, *target.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return target


def _interpreter_mounts(scratch: Path) -> list[tuple[str, str]]:
    base, venv = os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)
    if base == venv:
        raise HarnessError("the container tests run from the kit's virtual environment (.venv/bin/python)")
    if base in ("/usr", "/usr/local") or not base.startswith("/"):
        raise HarnessError(f"the interpreter lives in {base}, which would hide the image's own; the harness "
                           "bind-mounts an interpreter installed in a folder of its own (pyenv, /opt/...)")
    mounts = [(base, base), (venv, VENV)]
    # the editable install's finder, pointed at the copy of the checkout (whichever checkout it was made from)
    for finder in Path(venv).glob("lib/python*/site-packages/__editable__*finder.py"):
        text = finder.read_text()
        pointed = re.sub(r"""(['"])/[^'"]*/autograder\1""", lambda m: f"{m[1]}{SOURCE}/autograder{m[1]}", text)
        if pointed != text:
            scratch.mkdir(parents=True, exist_ok=True)
            rewritten = scratch / finder.name
            rewritten.write_text(pointed)
            rewritten.chmod(0o644)
            mounts.append((str(rewritten), VENV + str(finder)[len(venv):]))
    return mounts


def podman_ulimits() -> list[str]:
    """Podman gives a rootful container 1048576 open files and 32768 processes, which needs CAP_SYS_RESOURCE
    where the caller's hard limits are lower ('error setting rlimit type 7: operation not permitted').  Without
    that capability, the same limits cut to the caller's own."""
    effective = int(next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                         if line.startswith("CapEff:")), 16)
    if effective & (1 << 24):  # CAP_SYS_RESOURCE
        return []
    nofile = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 1048576)
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 32768)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


class ContainerTimeout(AssertionError):
    pass


def run_in_container(engine: str, user: str, command: list[str], mounts: list[tuple[Path | str, str]] = (),
                     *, scratch: Path, timeout: float = 600, workdir: str = "/", env: dict[str, str] = None
                     ) -> subprocess.CompletedProcess:
    """Runs `command` in a fresh container of `engine` ("docker" or "podman") as `user` ("root" or "1000"),
    with the interpreter, the venv and `mounts` ((host path, container path), all read-only).  The container
    has the engine's default seccomp profile and capabilities, no network and no memory limit; it is removed
    afterwards, and killed at `timeout` (ContainerTimeout).  `scratch` is a host folder for the harness's own
    files."""
    image = ensure_image(engine)
    name = f"autograder-test-{uuid.uuid4().hex[:12]}"
    argv = [*_engine(engine), "run", "--rm", "--name", name, "--network", "none", "--user", USERS[user],
            "--workdir", workdir]
    if engine == "podman":
        argv += podman_ulimits()
    for key, value in (env or {}).items():
        argv += ["--env", f"{key}={value}"]
    for host, inside in [*_interpreter_mounts(scratch), *mounts]:
        argv += ["--volume", f"{host}:{inside}:ro"]
    argv += [image, *command]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ContainerTimeout(f"{engine} as {user}: {command} ran longer than {timeout} s; stderr: "
                               f"{(exc.stderr or b'')[-2000:]!r}") from None
    finally:  # a container outlives its client (a timeout, Ctrl-C): remove it whatever happened
        subprocess.run([*_engine(engine), "rm", "--force", name], capture_output=True, timeout=60)
