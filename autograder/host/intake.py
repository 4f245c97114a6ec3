"""Reading a submission's file on the trusted side: the one way every front end does it.

A submission is a regular file inside the folder it was found in.  The path from that folder down is opened
one name at a time, none of them followed if it is a symbolic link, so a notebook that links to a classmate's
or to the instructor's source, a student folder that links to another student's, and a link to /dev/stdout are
each refused by what they are.  Nothing that is not a regular file is opened at all (a FIFO would block the
read, a device might never end or act on being opened), and a regular file is read to at most the size limit
plus one byte, so every read is bounded in bytes and cannot wait on anyone.  The bytes that are hashed are the
bytes that are graded: a file that changes while being read is graded as it was read.
"""
from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from autograder.protocol import one_line

MAX_SUBMISSION_BYTES = 20 << 20  # a notebook with its outputs (plots are base64 text)
KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO (named pipe)",
         stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}
WHAT = {".ipynb": "a notebook", ".py": "a Python file"}
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class UnreadableSubmission(Exception):
    """The file cannot be read as a submission; the message is the student-facing reason."""


def shown_name(text: str) -> str:
    """A name the student chose, as a message may quote it: bytes that are not UTF-8, escape sequences and
    line breaks made harmless, and cut short."""
    return one_line(text, 200)


def _kind(mode: int) -> str:
    return KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _kind_of(folder: int, name: str) -> str:
    try:
        return _kind(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return "gone"


def read_submission(path: Path, within: Path | None = None) -> bytes:
    """The bytes of the submission at `path`, which lies inside `within` (the folder it was found in; by
    default its own folder).  Raises UnreadableSubmission naming the path below `within` and what it is."""
    within = path.parent if within is None else within
    try:
        names = path.relative_to(within).parts
    except ValueError:
        raise UnreadableSubmission(f"{shown_name(str(path))} is not inside {shown_name(str(within))}") from None
    if not names:
        raise UnreadableSubmission(f"{shown_name(str(path))} is a folder, not a submission file")
    what = WHAT.get(path.suffix, "a submission file")
    try:
        folder = os.open(within, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the grader's own choice
    except OSError as exc:
        raise UnreadableSubmission(f"{shown_name(str(within))} cannot be read: {exc.strerror}") from None
    try:
        for depth, name in enumerate(names[:-1], 1):
            shown = shown_name("/".join(names[:depth]))
            try:
                inner = os.open(name, _FOLDER, dir_fd=folder)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnreadableSubmission(f"{shown} is {_kind_of(folder, name)}, not a folder") from None
                raise UnreadableSubmission(f"{shown} cannot be read: {exc.strerror}") from None
            os.close(folder)
            folder = inner
        return _read_file(folder, names[-1], shown_name("/".join(names)), what)
    finally:
        os.close(folder)


def _read_file(folder: int, name: str, shown: str, what: str) -> bytes:
    try:
        seen = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError as exc:
        raise UnreadableSubmission(f"{shown} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(seen.st_mode):  # never opened: opening is where a FIFO blocks and a device acts
        raise UnreadableSubmission(f"{shown} is {_kind(seen.st_mode)}, not {what}")
    try:
        fd = os.open(name, _FILE, dir_fd=folder)
    except OSError as exc:
        raise UnreadableSubmission(f"{shown} cannot be read: {exc.strerror}") from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
            raise UnreadableSubmission(f"{shown} was replaced while it was read")
        chunks, size = [], 0
        while size <= MAX_SUBMISSION_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_SUBMISSION_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise UnreadableSubmission(f"{shown} cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > MAX_SUBMISSION_BYTES:
        raise UnreadableSubmission(f"{shown} is larger than {MAX_SUBMISSION_BYTES >> 20} MB")
    return b"".join(chunks)


def submission_sha256(path: Path, within: Path | None = None) -> str:
    """The hash of the bytes `read_submission` reads, or "" when it refuses the file."""
    try:
        return hashlib.sha256(read_submission(path, within)).hexdigest()
    except UnreadableSubmission:
        return ""
