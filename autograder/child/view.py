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
    """A path the sandbox needs holds a folder that must stay out of its sight (the kit's checkout, the
    course's folder)."""


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


def _holds(outer: str, inner: str) -> bool:
    return outer == inner or inner.startswith(outer.rstrip("/") + "/")


def import_path(imports: tuple[str, ...]) -> list[str]:
    """The child's sys.path: the grader's import folders (autograder.host.sandbox.import_folders: the standard
    library, the site-packages and what their .pth files add; never its working directory nor PYTHONPATH)
    that exist.  All of them are readable: readable_paths refuses a view where one is hidden."""
    return [p for p in imports if os.path.exists(p)]


@functools.cache  # computed once in the zygote (autograder.child.serve.prepare), inherited by every child
def readable_paths(engine: str | None, hidden: tuple[str, ...], imports: tuple[str, ...]) -> list[str]:
    """Existing files and folders the sandbox reads, outermost first, none inside another: the interpreter,
    the shared libraries, `imports` (where it imports installed code from) and the `engine`.  `hidden` (the
    kit's checkout, the course's folder) are never shown, though folders inside them may be (a virtual
    environment, the engine).  Raises HiddenInView when a needed path holds one of them."""
    wanted = _interpreter_paths() | _loaded_library_folders() | set(ETC_FILES)
    wanted |= {os.path.realpath(p) for p in import_path(imports)}
    if engine:
        wanted.add(os.path.realpath(engine))
    hidden_real = {os.path.realpath(h) for h in hidden}
    kept: list[str] = []
    for path in sorted((p for p in wanted if os.path.exists(p)), key=lambda p: (p.count("/"), p)):
        if any(_holds(k, path) for k in kept):
            continue  # already visible through a folder above it
        for real in hidden_real:
            if _holds(path, real):
                what = ("the grading engine" if engine and _holds(path, os.path.realpath(engine)) else
                        "the interpreter and its installed packages")
                held = "is" if path == real else "holds"
                raise HiddenInView(f"{path}, which the sandbox must read for {what}, {held} {real}, which no "
                                   f"sandbox may see (the kit's checkout or the course's folder): move {real} out "
                                   f"of {path}, or install {what} elsewhere")
        kept.append(path)
    return kept  # shared through the cache: callers do not change it
