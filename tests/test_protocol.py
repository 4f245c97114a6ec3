"""The wire format: what the child may send is checked field by field; nothing is unpickled."""
import socket

import numpy as np
import pytest
import torch

from autograder import protocol
from autograder.remote import _make_tensor, _tensor_bytes


def roundtrip(value):
    encoder = protocol.Encoder(_tensor_bytes)
    node = encoder.encode(value)
    return protocol.Decoder(b"".join(encoder.blobs), _make_tensor).decode(node)


def test_values_roundtrip_exactly():
    x = torch.randn(2, 3, dtype=torch.float64)
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    value = roundtrip([x, mask, 1.5, float("nan"), 7, True, None, "s", {"w": x.float()}])
    assert torch.equal(value[0], x) and value[0].dtype == torch.float64
    assert torch.equal(value[1], mask) and value[1].dtype == torch.bool
    assert value[2] == 1.5 and np.isnan(value[3]) and value[4:8] == [7, True, None, "s"]
    assert type(value[4]) is int and type(value[2]) is float
    assert torch.equal(value[8]["w"], x.float())


def test_zero_dim_tensor_stays_a_tensor():
    value = roundtrip(torch.tensor(3.0))
    assert isinstance(value, torch.Tensor) and value.shape == ()


def test_unknown_objects_cross_as_type_names_only():
    assert roundtrip(object()) == ("opaque", "object")


@pytest.mark.parametrize("node, payload, problem", [
    ({"k": "tensor", "dtype": "float32", "shape": [4], "nbytes": 16}, b"\0" * 8, "missing"),
    ({"k": "tensor", "dtype": "float32", "shape": [4], "nbytes": 8}, b"\0" * 16, "does not match"),
    ({"k": "tensor", "dtype": "object", "shape": [1], "nbytes": 8}, b"\0" * 8, "not allowed"),
    ({"k": "tensor", "dtype": "float32", "shape": [-1], "nbytes": 4}, b"\0" * 4, "shape"),
    ({"k": "tensor", "dtype": "float32", "shape": [1 << 30, 1 << 30], "nbytes": 4}, b"", "shape"),
    ({"k": "tensor", "dtype": "bool", "shape": [1], "nbytes": 1}, b"\x07", "0 and 1"),
    ({"k": "pickle", "v": "gASV"}, b"", "unknown"),
    ({"k": "int", "v": "9" * 100}, b"", "malformed"),
    ({"k": "float", "v": 1.0}, b"", "malformed"),
    ({"k": "plain", "v": [1]}, b"", "malformed"),
    ("not a dict", b"", "malformed"),
])
def test_malformed_values_are_rejected(node, payload, problem):
    with pytest.raises(protocol.ProtocolError, match=problem):
        protocol.Decoder(payload, _make_tensor).decode(node)


def test_deep_nesting_is_rejected():
    node = {"k": "list", "v": []}
    for _ in range(20):
        node = {"k": "list", "v": [node]}
    with pytest.raises(protocol.ProtocolError):
        protocol.Decoder(b"", _make_tensor).decode(node)


def test_oversized_and_non_json_messages_are_rejected():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(protocol.PREFIX.pack(10, protocol.MAX_PAYLOAD_BYTES + 1))
        with pytest.raises(protocol.ProtocolError, match="too large"):
            protocol.recv(b)
        a.sendall(protocol.PREFIX.pack(3, 0) + b"{{{")
        with pytest.raises(protocol.ProtocolError, match="not JSON"):
            protocol.recv(b)


def test_a_late_message_times_out_and_a_closed_socket_is_eof():
    import time
    a, b = socket.socketpair()
    with b:
        with pytest.raises(protocol.Timeout):
            protocol.recv(b, deadline=time.monotonic() + 0.05)
        a.close()
        with pytest.raises(EOFError):
            protocol.recv(b, deadline=time.monotonic() + 1)
