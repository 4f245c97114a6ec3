"""The wire format between the judge and the sandboxed child.

A message is an 8-byte prefix (header length, payload length, big-endian), a JSON header and a payload of
raw tensor bytes.  Values are encoded as tagged JSON; tensors as dtype + shape + bytes.  Nothing is pickled
and nothing is evaluated, so the trusted side only ever decodes numbers it can check.

This module is imported by the child too, so it depends on the standard library and numpy only (torch is
imported lazily where tensors are built).
"""
from __future__ import annotations

import builtins
import json
import math
import socket
import struct
import time
from typing import Any

import numpy as np

PREFIX = struct.Struct(">II")
MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 256 << 20
MAX_TENSOR_ELEMENTS = 16 << 20
MAX_NESTING = 8
MAX_ITEMS = 4096

# the only dtypes that cross the boundary, both directions
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
          "int32": np.int32, "uint8": np.uint8, "bool": np.bool_}


class ProtocolError(Exception):
    """A message that breaks the format: too big, truncated, wrong types, unknown tags."""


class Timeout(Exception):
    """No complete message arrived before the deadline."""


def pack(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    head = json.dumps(header, allow_nan=True, separators=(",", ":")).encode()
    payload = b"".join(blobs)
    return PREFIX.pack(len(head), len(payload)) + head + payload


def send(sock: socket.socket, header: dict[str, Any], blobs: list[bytes] = ()) -> None:
    sock.sendall(pack(header, list(blobs)))


def _recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks, remaining = [], size
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


def recv(sock: socket.socket, deadline: float | None = None,
         max_payload: int = MAX_PAYLOAD_BYTES) -> tuple[dict[str, Any], bytes]:
    head_len, payload_len = PREFIX.unpack(_recv_exact(sock, PREFIX.size, deadline))
    if head_len > MAX_HEADER_BYTES or payload_len > max_payload:
        raise ProtocolError(f"message too large ({head_len} header bytes, {payload_len} payload bytes)")
    try:
        header = json.loads(_recv_exact(sock, head_len, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    return header, _recv_exact(sock, payload_len, deadline)


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

    def __init__(self, tensor_bytes) -> None:
        self.tensor_bytes = tensor_bytes
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
        found = self.tensor_bytes(value)
        if found is None:
            return {"k": "opaque", "type": type(value).__name__[:100]}
        dtype, shape, data = found
        self.blobs.append(data)
        return {"k": "tensor", "dtype": dtype, "shape": list(shape), "nbytes": len(data)}


class Decoder:
    """Checks and rebuilds what an Encoder produced.  Every field is validated: this runs on the trusted
    side on bytes the student's process chose."""

    def __init__(self, payload: bytes, make_tensor) -> None:
        self.payload = memoryview(payload)
        self.offset = 0
        self.make_tensor = make_tensor

    def decode(self, node: Any, depth: int = 0) -> Any:
        if depth > MAX_NESTING or not isinstance(node, dict):
            raise ProtocolError("malformed value")
        kind = node.get("k")
        if kind == "plain":
            value = node.get("v")
            if value is not None and type(value) not in (bool, str):
                raise ProtocolError("malformed plain value")
            return value
        if kind == "int":
            text = node.get("v")
            if type(text) is not str or len(text) > 40:
                raise ProtocolError("malformed int")
            return int(text)
        if kind == "float":
            text = node.get("v")
            if type(text) is not str or len(text) > 40:
                raise ProtocolError("malformed float")
            return float(text)
        if kind == "list":
            items = node.get("v")
            if type(items) is not list or len(items) > MAX_ITEMS:
                raise ProtocolError("malformed list")
            return [self.decode(v, depth + 1) for v in items]
        if kind == "dict":
            items = node.get("v")
            if type(items) is not dict or len(items) > MAX_ITEMS:
                raise ProtocolError("malformed dict")
            return {str(k): self.decode(v, depth + 1) for k, v in items.items()}
        if kind == "opaque":
            return ("opaque", str(node.get("type", "?"))[:100])
        if kind == "tensor":
            return self.make_tensor(*self._tensor_parts(node))
        raise ProtocolError(f"unknown value kind {kind!r}")

    def _tensor_parts(self, node: dict) -> tuple[np.ndarray, str]:
        dtype, shape, nbytes = node.get("dtype"), node.get("shape"), node.get("nbytes")
        if dtype not in DTYPES:
            raise ProtocolError(f"tensor dtype {dtype!r} is not allowed")
        if (type(shape) is not list or len(shape) > 8
                or not all(type(s) is int and 0 <= s <= MAX_TENSOR_ELEMENTS for s in shape)):
            raise ProtocolError("malformed tensor shape")
        count = math.prod(shape)
        itemsize = np.dtype(DTYPES[dtype]).itemsize
        if count > MAX_TENSOR_ELEMENTS or nbytes != count * itemsize:
            raise ProtocolError("tensor size does not match its shape")
        if self.offset + nbytes > len(self.payload):
            raise ProtocolError("tensor bytes missing from the payload")
        raw = self.payload[self.offset:self.offset + nbytes]
        self.offset += nbytes
        array = np.frombuffer(raw, dtype=DTYPES[dtype]).reshape(shape).copy()
        if dtype == "bool" and array.size and array.view(np.uint8).max() > 1:
            raise ProtocolError("bool tensor holds values other than 0 and 1")
        return array, dtype
