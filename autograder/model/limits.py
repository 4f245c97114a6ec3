"""What one submission may use, and the one place its knobs are described.

The command line's flags, nbgrader's traits and nbgrader_config.py's environment variables are all generated
from the `Limits` fields below, so a new limit appears everywhere by being added here.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

ENV_PREFIX = "AUTOGRADER_"


def _limit(default: float | int, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Limits:
    """What one submission may use.  Defaults suit a 2-core CI machine."""

    timeout: float = _limit(180.0, "wall seconds for the whole submission: loading plus every request")
    cell_timeout: float = _limit(30.0, "wall seconds per notebook cell while loading")
    request_timeout: float = _limit(20.0, "wall seconds per request to the submission (one forward, one backward)")
    memory_mb: int = _limit(2048, "memory of the whole submission: the address space of its one process, its scratch mounts and its pipes' buffers together (the reference needs about 1 GB)")
    output_kb: int = _limit(64, "printed output kept (the rest is drained and dropped)")
    reply_mb: int = _limit(64, "largest reply accepted from the submission's process")
    file_size_mb: int = _limit(16, "largest file the submission may write")
    open_files: int = _limit(256, "open files the submission may hold")
    processes: int = _limit(64, "threads of one sandbox (it may start no other process; counted under its own uid or user namespace)")
    # False only when the grader explicitly allows grading without isolation; set as allow_unisolated
    isolate: bool = field(default=True, metadata={"help": "grade even where this machine allows no sandbox "
                                                          "(every result then says so)", "as": "allow_unisolated"})

    def __post_init__(self) -> None:
        for knob in knobs():
            value = getattr(self, knob.field)
            if knob.kind is not bool and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"the limit {knob.name} must be a positive number, not {value!r}")


# Tier 1's private tmpfs mounts (/tmp, /dev/shm and its home): their files are memory that no address space
# holds, so their sizes are taken off the address space (in both tiers, so that a grade is the same in both)
SCRATCH_MOUNTS, SCRATCH_MB = 3, 64
PIPE_BUFFER_BYTES = 64 << 10  # a pipe's default buffer, which the seccomp filter keeps it from growing


def outside_address_space(limits: Limits) -> int:
    """Bytes a submission may hold in the kernel outside its address space: its scratch mounts' files, and the
    buffers of the pipes its open descriptors can keep (one each at most).  Nothing else outside it can be
    created: the filter refuses memfds, System V and POSIX IPC, socket pairs and new processes."""
    return (SCRATCH_MOUNTS * SCRATCH_MB << 20) + limits.open_files * PIPE_BUFFER_BYTES


def address_space(limits: Limits) -> int:
    """RLIMIT_AS of the submission's one process: with what it can hold outside, exactly --memory-mb.  The
    kernel checks it before memory is mapped, so the bound holds before the memory is taken."""
    return max((limits.memory_mb << 20) - outside_address_space(limits), 1 << 20)


def rlimits(limits: Limits) -> dict[str, int]:
    """Set by the child right after the fork, before its cells arrive.  RLIMIT_NPROC is not among them: it is
    set once the child has its own identity, so that it counts this sandbox's processes alone."""
    cpu = int(limits.timeout) + 5
    return {"RLIMIT_AS": address_space(limits), "RLIMIT_CPU": cpu, "RLIMIT_FSIZE": limits.file_size_mb << 20,
            "RLIMIT_CORE": 0, "RLIMIT_NOFILE": limits.open_files}


@dataclass(frozen=True)
class Knob:
    """One limit as a user sets it: `--name` on the command line, a trait of nbgrader's SandboxedGrading,
    AUTOGRADER_NAME in the environment."""

    field: str      # the Limits field
    name: str       # the user-facing name (the field's, or its "as" for a negated switch)
    kind: type      # float, int or bool
    default: Any    # in the user-facing sense (allow_unisolated defaults to False)
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def variable(self) -> str:
        return ENV_PREFIX + self.name.upper()

    def limit_value(self, value: Any) -> Any:
        """The Limits field's value for the user's value of this knob."""
        return (not value) if self.name != self.field else value


def knobs() -> list[Knob]:
    found = []
    for f in dataclasses.fields(Limits):
        kind = {"float": float, "int": int, "bool": bool}[f.type if isinstance(f.type, str) else f.type.__name__]
        name = f.metadata.get("as", f.name)
        default = (not f.default) if name != f.name else f.default
        found.append(Knob(f.name, name, kind, default, f.metadata["help"]))
    return found


def _positive(kind: type, text: str) -> float | int:
    value = kind(text)
    if not value > 0:
        raise ValueError(f"{text!r} is not a positive number")
    return value


def add_flags(parser: argparse.ArgumentParser) -> None:
    for knob in knobs():
        if knob.kind is bool:
            parser.add_argument(knob.flag, action="store_true", help=knob.help)
            continue

        def parse(text: str, kind: type = knob.kind) -> float | int:
            try:
                return _positive(kind, text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}") from None

        parser.add_argument(knob.flag, type=parse, default=None, metavar=knob.kind.__name__.upper(),
                            help=f"{knob.help} (default {knob.default:g})")


def from_flags(args: argparse.Namespace) -> Limits:
    chosen = {knob.field: knob.limit_value(getattr(args, knob.name)) for knob in knobs()
              if getattr(args, knob.name) not in (None, False)}
    return Limits(**chosen)


class BadLimit(ValueError):
    pass


def from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The knobs set in `environ` (AUTOGRADER_TIMEOUT=100, AUTOGRADER_ALLOW_UNISOLATED=1, ...), by knob name;
    a value that does not parse raises BadLimit naming the variable."""
    chosen: dict[str, Any] = {}
    for knob in knobs():
        text = environ.get(knob.variable)
        if text is None:
            continue
        if knob.kind is bool:
            if text.strip().lower() not in ("1", "true", "yes", "0", "false", "no", ""):
                raise BadLimit(f"{knob.variable}={text!r}: expected 1/true/yes or 0/false/no")
            chosen[knob.name] = text.strip().lower() in ("1", "true", "yes")
            continue
        try:
            chosen[knob.name] = _positive(knob.kind, text)
        except ValueError:
            raise BadLimit(f"{knob.variable}={text!r}: expected a positive {knob.kind.__name__}") from None
    return chosen
