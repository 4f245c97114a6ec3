"""How much of torch's own implementation of a graded operation a submission's source holds, for review.

Code the submission runs is refused when it *is* torch's (autograder.child.provenance compares code objects).
A copy the student pasted and edited (renamed, reformatted, annotations dropped) is no longer torch's code
object, yet it is not the student's work either: a copying question, answered the way MOSS and copydetect
answer one.  Each function of the corpus (below) and the submission's cells are reduced to token streams in
which identifiers, numbers and strings lose their spelling (so renaming changes nothing) while attribute names
and operators keep theirs (`.masked_fill`, `@`: what the code does); the k-grams of those streams are hashed
and winnowed (Schleimer, Wilkerson and Aiken, 2003), which guarantees that any shared run of GUARANTEE tokens
is seen.  A corpus function at least FLAG_SHARE of whose fingerprints appear in the submission is reported on
the result, in its summary and in the class report.  Nothing is scored: an instructor decides.

The corpus is what the rubric refuses, found in torch's installed source by what it is, not by a list: every
function or class whose name matches a part's `forbidden_ops` pattern or the last name of an `off_limits`
entry (a class gives one entry per method), anywhere in torch's Python files, with the module-level functions
of the same file that they call (torch._refs.native_layer_norm's arithmetic is in `_normalize`).  Building it
reads all of torch's source (about a second), so it is kept in the grader's cache folder (AUTOGRADER_CACHE, or
XDG_CACHE_HOME/autograder), keyed by torch's version and location, the patterns and this module's parameters.
"""
from __future__ import annotations

import fnmatch
import functools
import hashlib
import io
import json
import keyword
import os
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from autograder.judging import cache

NOISE = 12          # tokens per k-gram: shorter shared runs are idiom (`x.mean(dim=-1, keepdim=True)`)
GUARANTEE = 24      # a shared run at least this long is always seen
WINDOW = GUARANTEE - NOISE + 1
MIN_PRINTS = 8      # a corpus function with fewer fingerprints is a few lines that anyone writes alike
FLAG_SHARE = 0.6    # the share of a corpus function's fingerprints that makes a submission worth a look
MAX_REPORTED = 5
VERSION = f"1:{NOISE}:{GUARANTEE}"
SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
           tokenize.ENDMARKER, tokenize.TYPE_COMMENT}
STRINGS = {getattr(tokenize, kind) for kind in ("STRING", "FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
           if hasattr(tokenize, kind)}  # f-strings are tokens of their own from Python 3.12


@dataclass(frozen=True)
class Resemblance:
    function: str   # torch's qualified name of the corpus function, such as torch.nn.functional.layer_norm
    share: float    # of its fingerprints, found in the submission

    def notice(self) -> str:
        return (f"{self.share:.0%} of {self.function}, torch's own implementation, appears in this submission's "
                "code: code copied from torch is not the student's work")


def _normalised(source: str) -> list[str]:
    """The tokens of `source` that say what it does: a name is `v` unless it follows a dot, a number `0`, a
    string `s`; docstrings, comments and layout are dropped.  Text that stops tokenizing ends the stream."""
    return [word for word, _ in normalised_tokens(source)]


def normalised_tokens(source: str) -> list[tuple[str, int]]:
    """`_normalised`'s tokens, each with the line of `source` (from 1) it stands for: where a match is."""
    out: list[tuple[str, int]] = []
    line: list[tuple[str, int]] = []
    previous = ""
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            kind, text = token.type, token.string
            if kind in SKIPPED:
                continue
            if kind == tokenize.NEWLINE:
                if line and {word for word, _ in line} != {"s"}:  # a line of strings only is a docstring
                    out += line
                    out.append((";", token.start[0]))
                line, previous = [], ""
                continue
            if kind == tokenize.NAME:
                word = text if keyword.iskeyword(text) or previous == "." else "v"
            elif kind == tokenize.NUMBER:
                word = "0"
            elif kind in STRINGS:
                word = "s"
            else:
                word = text
            line.append((word, token.start[0]))
            previous = text
    except (tokenize.TokenError, SyntaxError):
        pass
    return out + line


def kgram_hashes(tokens: Sequence[str]) -> list[int]:
    """The hash of each NOISE-gram of a normalised token stream, in order."""
    return [int.from_bytes(hashlib.blake2b("\x1f".join(tokens[i:i + NOISE]).encode(), digest_size=8).digest(),
                           "big") for i in range(len(tokens) - NOISE + 1)]


def fingerprints(source: str) -> set[int]:
    """The winnowed hashes of `source`'s NOISE-grams: the smallest of every WINDOW consecutive ones."""
    hashes = kgram_hashes(_normalised(source))
    if len(hashes) <= WINDOW:
        return {min(hashes)} if hashes else set()
    return {min(hashes[i:i + WINDOW]) for i in range(len(hashes) - WINDOW + 1)}


# -- the corpus -------------------------------------------------------------------------------------------------

DEFINITION = re.compile(r"^([ \t]*)(?:async[ \t]+)?(def|class)[ \t]+(\w+)", re.M)
CALL = re.compile(r"(?<![.\w])(\w+)\(")


@functools.cache
def _end_of_block(indent: int) -> re.Pattern:
    return re.compile(r"\n(?![ \t]{%d}[ \t]|[ \t]*(?:#[^\n]*)?\n|[ \t]*[)\]])" % indent)


def _definitions(text: str) -> list[tuple[int, str, str, int, int]]:
    """(indent, def or class, name, start, end) of each definition in `text`, as character offsets; a
    definition ends before the next line that is neither blank, a comment nor indented deeper."""
    found = []
    for match in DEFINITION.finditer(text):
        indent = len(match.group(1))
        ending = _end_of_block(indent).search(text, match.end())
        found.append((indent, match.group(2), match.group(3), match.start(), ending.start() + 1 if ending else len(text)))
    return found


def _dedented(text: str) -> str:
    lines = text.splitlines(keepends=True)
    indent = min((len(t) - len(t.lstrip()) for t in lines if t.strip()), default=0)
    return "".join(t[indent:] if t.strip() else "\n" for t in lines)


@functools.lru_cache(maxsize=1 << 16)
def _wanted(name: str, names: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, n) for n in names)


def _entries_of_file(text: str, module: str, names: tuple[str, ...]) -> dict[str, str]:
    """torch's qualified name -> source of each definition in `text` the corpus holds."""
    definitions = _definitions(text)
    top = {name: (start, end) for indent, kind, name, start, end in definitions if not indent and kind == "def"}
    entries: dict[str, str] = {}
    for indent, kind, name, start, end in definitions:
        if not _wanted(name, names):
            continue
        if kind == "class":
            for _, inner, method, m_start, m_end in definitions:
                if inner == "def" and start < m_start < end:
                    entries.setdefault(f"{module}.{name}.{method}", _dedented(text[m_start:m_end]))
        else:
            entries.setdefault(f"{module}.{name}", _dedented(text[start:end]))
        for callee in set(CALL.findall(text, start, end)) - {name}:
            if callee in top:  # a helper of the same module that holds part of the implementation
                entries.setdefault(f"{module}.{callee}", _dedented(text[slice(*top[callee])]))
    return entries


def _torch_root() -> Path:
    import torch

    return Path(torch.__file__).parent


def build_corpus(names: tuple[str, ...]) -> dict[str, list[int]]:
    """torch's qualified name -> the fingerprints of each definition of the corpus, from torch's source."""
    root = _torch_root()
    # a cheap test before a file is read closely: the longest literal piece of some pattern occurs in it
    pieces = {max(re.split(r"[*?\[\]]", n), key=len).encode() for n in names} - {b""}
    corpus: dict[str, list[int]] = {}
    for folder, _, files in os.walk(root):
        for file in sorted(files):
            if not file.endswith(".py"):
                continue
            path = Path(folder, file)
            try:
                raw = path.read_bytes()
            except OSError:
                continue
            if not any(piece in raw for piece in pieces):
                continue
            text = raw.decode("utf-8", "replace")
            module = ".".join(("torch", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
            for name, source in _entries_of_file(text, module, names).items():
                prints = fingerprints(source)
                if len(prints) >= MIN_PRINTS:
                    corpus[name] = sorted(prints)
    return corpus


@functools.cache
def corpus(names: tuple[str, ...]) -> dict[str, frozenset[int]]:
    """The corpus for `names`, from the cache folder when it holds this one; built and stored otherwise.  A
    cache that cannot be read or written only costs the time to build it."""
    import torch

    key = hashlib.sha256(json.dumps([VERSION, torch.__version__, str(_torch_root()), names]).encode()).hexdigest()
    entry = f"resemblance-{key[:32]}.json"
    try:
        stored = json.loads(cache.read(entry) or b"{}")
        if stored.get("key") == key and isinstance(stored.get("corpus"), dict):
            return {n: frozenset(p) for n, p in stored["corpus"].items()}
    except (ValueError, AttributeError, TypeError):
        pass
    built = build_corpus(names)
    cache.write(entry, json.dumps({"key": key, "corpus": built}).encode())
    return {n: frozenset(p) for n, p in built.items()}


def resemblances(cells: Sequence[str], names: tuple[str, ...]) -> list[Resemblance]:
    """The corpus functions of which at least FLAG_SHARE appears in `cells`, most copied first; one whose
    shared code is mostly that of a function reported before it (a short function of the same shape) is not
    reported again."""
    submitted: set[int] = set()
    for cell in cells:
        submitted |= fingerprints(cell)
    implementations = corpus(names)
    shared = {name: prints & submitted for name, prints in implementations.items()}
    candidates = sorted(((len(shared[n]) / len(p), n) for n, p in implementations.items()
                         if len(shared[n]) >= FLAG_SHARE * len(p)), key=lambda c: (-c[0], c[1]))
    found: list[Resemblance] = []
    seen: set[int] = set()
    for share, name in candidates:
        if len(shared[name] - seen) * 2 > len(shared[name]) and len(found) < MAX_REPORTED:
            found.append(Resemblance(name, share))
        seen |= shared[name]
    return found
