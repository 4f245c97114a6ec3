"""What a sandbox may read: an allow-list built from what this interpreter is made of, wherever it lives.

Both tiers of the isolation use it: tier 1 bind-mounts these paths into an empty root, tier 2 grants them
to Landlock.  It never names a system folder wholesale (a course installed under /opt, /srv, /usr/local or a
home folder would be inside it): it holds the interpreter's executable and standard library, the
environment's site-packages, the kit's engine, the folders of the shared libraries the process has loaded
and the few /etc files that the C library reads.  Stdlib only: it runs in the child before any student line.
"""
from __future__ import annotations

import functools
import os
import sys
import sysconfig

# what the dynamic loader and the C library read (time zone, the loader's cache); nothing else of /etc
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")


class HiddenInView(Exception):
    """A path the sandbox needs holds the course's checkout, which must stay out of its sight."""


def _loaded_library_folders() -> set[str]:
    """The folders of every shared object mapped into this process (torch's, numpy's and the C library's,
    all loaded by the zygote), and the loader's usual ones, where a later import finds libz or libexpat."""
    folders = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                if len(fields) == 6 and fields[5].startswith("/") and ".so" in fields[5]:
                    folders.add(os.path.dirname(os.path.realpath(fields[5].strip())))
    except OSError:
        pass
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for folder in ("/lib64", "/usr/lib64", f"/lib/{multiarch}", f"/usr/lib/{multiarch}"):
        if multiarch or folder.endswith("64"):
            folders.add(os.path.realpath(folder))
    return folders


def _interpreter_paths() -> set[str]:
    paths = {os.path.realpath(sys.executable), os.path.realpath(sys._base_executable)}
    names = sysconfig.get_paths()
    paths.update(os.path.realpath(names[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib"))
    library = sysconfig.get_config_var("LDLIBRARY")
    if library and sysconfig.get_config_var("Py_ENABLE_SHARED"):
        paths.add(os.path.realpath(os.path.join(sysconfig.get_config_var("LIBDIR"), library)))
    # the virtual environment's own executables (its bin/python is a link to the executable above), and the
    # file that makes an interpreter started from them use the environment
    paths.add(os.path.realpath(os.path.join(sys.prefix, "bin")))
    paths.add(os.path.join(sys.prefix, "pyvenv.cfg"))
    return paths


@functools.cache  # computed once in the zygote (autograder.child.serve.prepare), inherited by every child
def readable_paths(engine: str | None, hidden: str | None) -> list[str]:
    """Existing files and folders the sandbox reads, outermost first, none inside another.  `hidden` is the
    kit's checkout: no path may hold it (the engine and a virtual environment may lie inside it).  Raises
    HiddenInView when one would."""
    wanted = _interpreter_paths() | _loaded_library_folders() | set(ETC_FILES)
    wanted |= {os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)}
    if engine:
        wanted.add(os.path.realpath(engine))
    hidden = os.path.realpath(hidden) if hidden else None
    if hidden:
        wanted.discard(hidden)
    kept: list[str] = []
    for path in sorted((p for p in wanted if os.path.exists(p)), key=lambda p: (p.count("/"), p)):
        if any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            continue  # already visible through a folder above it
        if hidden and (hidden == path or hidden.startswith(path.rstrip("/") + "/")):
            raise HiddenInView(f"{path} is needed by the interpreter but holds the course's checkout {hidden}; "
                               "install the course outside it")
        kept.append(path)
    return kept  # shared through the cache: callers do not change it
