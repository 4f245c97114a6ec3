"""Removing a sandbox's scratch folder, whatever its submission did to the modes of what it wrote there.

In tier 2 the scratch folder lies on the host, and Landlock does not cover chmod: a submission may take every
permission away from its folder and from anything below it, and nest folders deeper than a recursive walk
(shutil.rmtree) goes.  Whoever removes it is the grader, which is either root (its sandbox's files belong to
the sandbox's own uid, and root may change their modes) or the very uid that owns every entry (tier 2 as an
ordinary user, where the submission runs under the grader's uid), which may always give itself its
permissions back.  In tier 1 the submission's files live in tmpfs mounts of its own mount namespace, and the
folder on the host stays empty.

So: every folder is given back its owner's permissions through a descriptor opened without following a
link, and emptied by moving its entries up into the top folder, which keeps the depth of the walk and the
descriptors it holds at two, however deep the tree.  Nothing below the top folder is ever followed out of it.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
import uuid

OWNER_ONLY = stat.S_IRWXU


def _give_back(name: str, dir_fd: int | None = None) -> None:
    """The folder `name` (never a link: O_NOFOLLOW) gets read, write and search permission for its owner."""
    path_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=dir_fd)
    try:
        os.chmod(f"/proc/self/fd/{path_fd}", OWNER_ONLY)  # fchmod refuses an O_PATH descriptor; its link does not
    except PermissionError:
        pass  # not the owner: root with CAP_DAC_OVERRIDE needs no permission, anyone else fails on the next step
    finally:
        os.close(path_fd)


def _open_folder(name: str, dir_fd: int | None = None) -> int:
    _give_back(name, dir_fd)
    return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=dir_fd)


def _empty_into(top_fd: int, folder: str) -> None:
    """Moves everything in `folder` (an entry of the top folder) up into the top folder, then removes it."""
    inner_fd = _open_folder(folder, top_fd)
    try:
        for name in os.listdir(inner_fd):
            if stat.S_ISDIR(os.stat(name, dir_fd=inner_fd, follow_symlinks=False).st_mode):
                _give_back(name, inner_fd)  # moving a folder to another parent needs write permission on it
            os.rename(name, f".removed-{uuid.uuid4().hex}", src_dir_fd=inner_fd, dst_dir_fd=top_fd)
    finally:
        os.close(inner_fd)
    os.rmdir(folder, dir_fd=top_fd)


def _remove_flattening(top: str) -> None:
    top_fd = _open_folder(top)
    try:
        while names := os.listdir(top_fd):
            for name in names:
                if not stat.S_ISDIR(os.stat(name, dir_fd=top_fd, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=top_fd)
                    continue
                try:
                    os.rmdir(name, dir_fd=top_fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.EACCES, errno.EPERM):
                        raise
                    _empty_into(top_fd, name)
    finally:
        os.close(top_fd)
    os.rmdir(top)


def remove(path: str | os.PathLike) -> str | None:
    """Removes the folder `path` and everything below it: None once it is gone, else why not (one line, for a
    notice: a folder that stays is never ignored)."""
    try:
        shutil.rmtree(path)  # what nearly every submission leaves: the quick way
        return None
    except FileNotFoundError:
        return None
    except (OSError, RecursionError):
        pass
    try:
        _remove_flattening(os.fspath(path))
        return None
    except FileNotFoundError:
        return None if not os.path.lexists(path) else f"its scratch folder {path} could not be removed (it changed)"
    except OSError as exc:
        return f"its scratch folder {path} could not be removed ({exc.strerror or exc}); remove it by hand"
