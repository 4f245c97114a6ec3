"""The wire format between the judge and the sandboxed child.

A message is an 8-byte prefix (header length, payload length, big-endian), a JSON header and a payload of
raw tensor bytes.  Values are encoded as tagged JSON; tensors as dtype + shape + bytes.  Nothing is pickled
and nothing is evaluated, so the trusted side only ever decodes numbers it can check.  `loads` parses
JSON from the other side within limits, and `clean_text` makes any text from it safe to print.

This module is imported by the child too, so it depends on the standard library and numpy only (torch is
imported lazily where tensors are built).  numpy is imported where tensor bytes are read, not with this module:
a cold grader imports this module before it starts its zygote, and torch brings numpy later anyway.
"""
from __future__ import annotations

import builtins
import json
import math
import re
import socket
import struct
import time
import unicodedata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

PREFIX = struct.Struct(">II")
MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 256 << 20
MAX_TENSOR_ELEMENTS = 16 << 20
MAX_NESTING = 8
MAX_ITEMS = 4096
# a header is one flat object whose fields may hold encoded values: every value level is a node object plus
# its list or dict, and the deepest node (MAX_NESTING + 1 levels down) is a leaf object; test_protocol checks
# that the deepest value the Encoder accepts still passes
MAX_HEADER_DEPTH = 1 + 2 * (MAX_NESTING + 1)
MAX_HEADER_INT_DIGITS = 20

# the only dtypes that cross the boundary, both directions: each name as the wire, torch and numpy spell it
DTYPES = frozenset({"float32", "float64", "float16", "int64", "int32", "uint8", "bool"})


# the notice every result graded without isolation carries, as the host records it (kind "unisolated",
# autograder.model.load_report) when it started the child without isolation; never taken from the child
UNISOLATED = "graded WITHOUT isolation"
UNISOLATED_NOTICE = (f"{UNISOLATED} (allowed by the grader): the submission could read and change whatever the "
                     "grader's user can")
# what autograder.child.provenance names when it refuses a route to torch's own implementation: the child's
# word for one only costs it points, so any name of these shapes is taken
ROUTE = re.compile(r"torch\.[\w.<>]{1,120}|native code \([\w./ ,()-]{1,100}\)|torch's own code, "
                   r"(run afresh|rebuilt|compiled afresh)|the garbage collector's object lists \(gc\.\w+\)")


class ProtocolError(Exception):
    """A message that breaks the format: too big, truncated, wrong types, unknown tags."""


class Timeout(Exception):
    """No complete message arrived before the deadline."""


class JSONRejected(ValueError):
    """Text that `loads` refuses: not UTF-8, too deep, a huge integer, a lone surrogate."""


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how JSON text writes one (or half of a pair)
_ASCII_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_KEPT_FORMAT_CHARACTERS = {"\n", "\t", "\u200c", "\u200d"}  # line breaks, tabs; joiners inside words and emoji


def loads(data: bytes | str, max_depth: int, max_int_digits: int = 20) -> Any:
    """json.loads for text a hostile party wrote.  Raises ValueError (json.JSONDecodeError for text that is
    not JSON, JSONRejected for the rest) and nothing else: the C decoder recurses, so deep nesting would
    otherwise escape as RecursionError, and int() of more than 4,300 digits raises a plain ValueError (and is
    quadratic in the digits below that).  Lone surrogates are refused: they cannot be printed or encoded."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            data = bytes(data).decode("utf-8")  # json.loads would also guess UTF-16 and UTF-32
        except UnicodeDecodeError:
            raise JSONRejected("not UTF-8 text") from None
    # The checks below only look where the text can hold what they refuse (hundreds of messages per
    # submission, most of them small): an integer longer than max_int_digits needs that many digits in a row,
    # a lone surrogate needs one in the text or a \u escape of one, and nesting deeper than max_depth needs
    # more than max_depth brackets.  Where it can, each check runs in full, in the same order as always.
    long_digits = re.search(f"[0-9]{{{max_int_digits + 1}}}", data) is not None
    try:
        if long_digits:
            value = json.loads(data, parse_int=lambda text: _parse_int(text, max_int_digits))
        else:
            value = json.loads(data)
    except RecursionError:
        raise JSONRejected("nested too deeply") from None
    surrogates = _SURROGATE.search(data) is not None or _SURROGATE_ESCAPE.search(data) is not None
    if surrogates or data.count("[") + data.count("{") > max_depth:
        _check_tree(value, max_depth, surrogates)
    return value


def _parse_int(text: str, max_digits: int) -> int:
    if len(text) - text.startswith("-") > max_digits:
        raise JSONRejected(f"holds an integer with more than {max_digits} digits")
    return int(text)


def _check_tree(value: Any, max_depth: int, strings: bool = True) -> None:
    """Depth and, with `strings`, lone surrogates, walked with a stack of iterators: a recursive walk is what
    this guards against, and a stack of all pending nodes would cost as much memory as the value itself."""
    if type(value) is str and strings:
        _check_string(value)
    if type(value) not in (list, dict):
        return
    stack = [(_children(value, strings), 1)]
    while stack:
        items, depth = stack[-1]
        for item in items:
            kind = type(item)
            if kind is str:
                if strings:
                    _check_string(item)
            elif kind is list or kind is dict:
                if depth >= max_depth:
                    raise JSONRejected(f"nested too deeply (more than {max_depth} levels)")
                stack.append((_children(item, strings), depth + 1))
                break
        else:
            stack.pop()


def _children(container: list | dict, strings: bool) -> Any:
    if type(container) is list:
        return iter(container)
    if strings:
        for key in container:
            _check_string(key)
    return iter(container.values())


def _check_string(text: str) -> None:
    if not text.isascii() and _SURROGATE.search(text):
        raise JSONRejected("holds a lone surrogate (\\ud800-\\udfff), which is not text")


def clean_text(value: object, limit: int) -> str:
    """Anything, as at most `limit` printable characters that encode to UTF-8.  Control and other invisible
    characters (terminal escapes, bidi overrides) and lone surrogates become U+FFFD, except the surrogates
    that stand for undecodable bytes (a file name that is not UTF-8), which become \\xNN as in
    grading.as_text; \\n and \\t stay, \\r\\n and \\r become \\n."""
    limit = max(limit, 0)
    text = _as_text(value)
    cleaned = text[:limit].replace("\r\n", "\n").replace("\r", "\n")
    if cleaned.isascii():
        cleaned = _ASCII_CONTROL.sub("\ufffd", cleaned)
    elif not cleaned.isprintable():
        cleaned = "".join(_printable(c) for c in cleaned)
    if len(text) > limit or len(cleaned) > limit:  # escapes lengthen it
        cleaned = cleaned[:limit - 1] + "…" if limit else ""
    return cleaned


def one_line(value: object, limit: int) -> str:
    """clean_text on one line: line breaks and tabs become spaces (a name, a summary line, a CSV cell)."""
    return clean_text(value, limit).replace("\n", " ").replace("\t", " ")


def _as_text(value: object) -> str:
    if type(value) is str:
        return value
    try:
        return str(value)
    except Exception:  # a __str__ that raises, an int too long to print, a list nested too deeply
        return f"<{type(value).__name__}>"


def _printable(char: str) -> str:
    if char.isprintable() or char in _KEPT_FORMAT_CHARACTERS:
        return char
    if "\udc80" <= char <= "\udcff":  # how os.fsdecode carries a byte that is not UTF-8
        return f"\\x{ord(char) - 0xdc00:02x}"
    category = unicodedata.category(char)
    if category == "Zs":  # no-break and other wide spaces
        return " "
    return "\n" if category in ("Zl", "Zp") else "\ufffd"


def pack(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    # a lone surrogate (say, in a student's exception message) becomes "?": `loads` refuses the whole header
    # otherwise, and one odd string would cost the child every answer it gives
    text = json.dumps(header, allow_nan=True, ensure_ascii=False, separators=(",", ":"))
    head = text.encode("utf-8", "replace")
    payload = b"".join(blobs)
    return PREFIX.pack(len(head), len(payload)) + head + payload


def send(sock: socket.socket, header: dict[str, Any], blobs: list[bytes] = ()) -> None:
    sock.sendall(pack(header, list(blobs)))


def _recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks, remaining = [], size
    if deadline is None and sock.gettimeout() is not None:
        sock.settimeout(None)  # no deadline means none, whatever an earlier call left on the socket
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout()
            sock.settimeout(left)
        try:
            chunk = sock.recv(min(remaining, 1 << 20))
        except socket.timeout:
            raise Timeout() from None
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _recv_sizes(sock: socket.socket, deadline: float | None, max_payload: int) -> tuple[int, int]:
    head_len, payload_len = PREFIX.unpack(_recv_exact(sock, PREFIX.size, deadline))
    if head_len > MAX_HEADER_BYTES or payload_len > max_payload:
        raise ProtocolError(f"message too large ({head_len} header bytes, {payload_len} payload bytes)")
    return head_len, payload_len


def recv(sock: socket.socket, deadline: float | None = None,
         max_payload: int = MAX_PAYLOAD_BYTES) -> tuple[dict[str, Any], bytes]:
    """A message from the other side, every part of it checked: what the grader reads from the child."""
    head_len, payload_len = _recv_sizes(sock, deadline, max_payload)
    try:
        header = loads(_recv_exact(sock, head_len, deadline), MAX_HEADER_DEPTH, MAX_HEADER_INT_DIGITS)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from None
    except ValueError as exc:
        raise ProtocolError(f"header refused: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    return header, _recv_exact(sock, payload_len, deadline)


def recv_from_grader(sock: socket.socket) -> tuple[dict[str, Any], bytes]:
    """A message the grader sent, as the child reads it (autograder.child.serve): the grader's `pack` wrote
    it, so it is UTF-8 JSON with no lone surrogate, no huge integer and no nesting deeper than an Encoder
    allows, and the walk `loads` makes against a hostile writer (the child's side, for every request) finds
    nothing.  The sizes are checked as `recv` checks them.  The grader never reads with this."""
    head_len, payload_len = _recv_sizes(sock, None, MAX_PAYLOAD_BYTES)
    header = json.loads(_recv_exact(sock, head_len, None))
    return header, _recv_exact(sock, payload_len, None)


_BUILTIN_EXCEPTIONS = frozenset(v for v in vars(builtins).values()
                                if isinstance(v, type) and issubclass(v, BaseException))


def exception_bases(exc: BaseException) -> list[str]:
    """The builtin exception classes an exception derives from, by name: how `is it a ValueError?` is asked
    across the boundary without sending the class itself."""
    return [cls.__name__ for cls in type(exc).__mro__ if cls in _BUILTIN_EXCEPTIONS]


# --- values ---------------------------------------------------------------------------------------------

class Encoder:
    """Turns plain values and tensors into tagged JSON plus blobs.  `tensor_bytes` is supplied by the side
    that owns torch objects (it decides how to read a tensor's memory safely)."""

    def __init__(self, tensor_bytes, object_key=None) -> None:
        self.tensor_bytes = tensor_bytes
        self.object_key = object_key  # the grader's: a handle of the child's own object -> its key, else None
        self.blobs: list[bytes] = []

    def encode(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_NESTING:
            raise ProtocolError("value nested too deeply")
        kind = type(value)
        if value is None or kind is bool or kind is str:
            return {"k": "plain", "v": value}
        if kind is int:
            return {"k": "int", "v": str(value)}
        if kind is float:
            return {"k": "float", "v": repr(value)}
        if kind in (list, tuple):
            if len(value) > MAX_ITEMS:
                raise ProtocolError("sequence too long")
            return {"k": "list", "v": [self.encode(v, depth + 1) for v in value]}
        if kind is dict:
            if len(value) > MAX_ITEMS or not all(type(k) is str for k in value):
                raise ProtocolError("dict too long or with non-string keys")
            return {"k": "dict", "v": {k: self.encode(v, depth + 1) for k, v in value.items()}}
        if self.object_key is not None and (key := self.object_key(value)) is not None:
            return {"k": "object", "id": key}
        found = self.tensor_bytes(value)
        if found is None:
            return {"k": "opaque", "type": type(value).__name__[:100]}
        dtype, shape, data = found
        self.blobs.append(data)
        return {"k": "tensor", "dtype": dtype, "shape": list(shape), "nbytes": len(data)}


class Decoder:
    """Checks and rebuilds what an Encoder produced.  Every field is validated: this runs on the trusted
    side on bytes the student's process chose."""

    def __init__(self, payload: bytes, make_tensor, resolve_object=None) -> None:
        self.payload = memoryview(payload)
        self.offset = 0
        self.make_tensor = make_tensor
        # the child's: an object key -> the object.  The grader's decoder has none: replies carry values only
        self.resolve_object = resolve_object

    def decode(self, node: Any, depth: int = 0) -> Any:
        if depth > MAX_NESTING or type(node) is not dict:
            raise ProtocolError("malformed value")
        kind = node.get("k")
        if type(kind) is not str:
            raise ProtocolError("malformed value (no kind)")
        if kind == "plain":
            value = node.get("v")
            if value is not None and type(value) not in (bool, str):
                raise ProtocolError("malformed plain value")
            return value
        if kind in ("int", "float"):
            return self._number(kind, node.get("v"))
        if kind == "list":
            items = node.get("v")
            if type(items) is not list or len(items) > MAX_ITEMS:
                raise ProtocolError("malformed list")
            return [self.decode(v, depth + 1) for v in items]
        if kind == "dict":
            items = node.get("v")
            if type(items) is not dict or len(items) > MAX_ITEMS or not all(type(k) is str for k in items):
                raise ProtocolError("malformed dict")
            return {k: self.decode(v, depth + 1) for k, v in items.items()}
        if kind == "opaque":
            name = node.get("type", "?")
            return ("opaque", clean_text(name, 100) if type(name) is str else "?")
        if kind == "tensor":
            return self.make_tensor(*self._tensor_parts(node))
        if kind == "object" and self.resolve_object is not None:
            key = node.get("id")
            if type(key) is not int:
                raise ProtocolError("malformed object reference")
            return self.resolve_object(key)
        raise ProtocolError(f"unknown value kind {clean_text(kind, 40)!r}")

    @staticmethod
    def _number(kind: str, text: Any) -> int | float:
        # short text only: int() of a long digit string is slow, and nothing legitimate needs 40 digits
        if type(text) is not str or len(text) > 40:
            raise ProtocolError(f"malformed {kind}")
        try:
            return int(text) if kind == "int" else float(text)
        except ValueError:
            raise ProtocolError(f"malformed {kind}") from None

    def _tensor_parts(self, node: dict) -> tuple[np.ndarray, str]:
        import numpy as np

        dtype, shape, nbytes = node.get("dtype"), node.get("shape"), node.get("nbytes")
        if type(dtype) is not str or dtype not in DTYPES:
            raise ProtocolError(f"tensor dtype {clean_text(dtype, 40)!r} is not allowed")
        # type() is, not isinstance: True is an int to isinstance, and a float nbytes would slice the payload
        if (type(shape) is not list or len(shape) > 8
                or not all(type(s) is int and 0 <= s <= MAX_TENSOR_ELEMENTS for s in shape)):
            raise ProtocolError("malformed tensor shape")
        if type(nbytes) is not int:
            raise ProtocolError("malformed tensor size")
        count = math.prod(shape)
        itemsize = np.dtype(dtype).itemsize
        if count > MAX_TENSOR_ELEMENTS or nbytes != count * itemsize:
            raise ProtocolError("tensor size does not match its shape")
        if self.offset + nbytes > len(self.payload):
            raise ProtocolError("tensor bytes missing from the payload")
        raw = self.payload[self.offset:self.offset + nbytes]
        self.offset += nbytes
        array = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if dtype == "bool" and array.size and array.view(np.uint8).max() > 1:
            raise ProtocolError("bool tensor holds values other than 0 and 1")
        return array, dtype
