"""The wire format: what the child may send is checked field by field; nothing is unpickled."""
import socket
import time

import numpy as np
import pytest
import torch

from autograder import protocol
from autograder.host.remote import _make_tensor, _tensor_bytes


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
    # every field has the wrong type somewhere: each must give a ProtocolError, not a TypeError or ValueError
    ({"k": "tensor", "dtype": ["float32"], "shape": [1], "nbytes": 4}, b"\0" * 4, "not allowed"),
    ({"k": "tensor", "dtype": {"a": 1}, "shape": [1], "nbytes": 4}, b"\0" * 4, "not allowed"),
    ({"k": "tensor", "dtype": "float32", "shape": [True], "nbytes": 4}, b"\0" * 4, "shape"),
    ({"k": "tensor", "dtype": "float32", "shape": [1.0], "nbytes": 4}, b"\0" * 4, "shape"),
    ({"k": "tensor", "dtype": "float32", "shape": "4", "nbytes": 16}, b"\0" * 16, "shape"),
    ({"k": "tensor", "dtype": "float32", "shape": [1], "nbytes": 4.0}, b"\0" * 4, "size"),
    ({"k": "tensor", "dtype": "float32", "shape": [1], "nbytes": True}, b"\0" * 4, "size"),
    ({"k": "tensor", "dtype": "float32", "shape": [1], "nbytes": "4"}, b"\0" * 4, "size"),
    ({"k": "tensor", "dtype": "float32", "shape": [1]}, b"\0" * 4, "size"),
    ({"k": ["list"], "v": []}, b"", "malformed"),
    ({"k": {"k": "list"}, "v": []}, b"", "malformed"),
    ({"k": 7, "v": []}, b"", "malformed"),
    ({"v": []}, b"", "malformed"),
    ({"k": "int", "v": "seven"}, b"", "malformed int"),
    ({"k": "int", "v": 7}, b"", "malformed int"),
    ({"k": "float", "v": "1.0.0"}, b"", "malformed float"),
    ({"k": "dict", "v": {1: {"k": "plain", "v": None}}}, b"", "malformed dict"),
    ({"k": "dict", "v": [["a", {"k": "plain", "v": None}]]}, b"", "malformed dict"),
    ({"k": "list", "v": {"a": 1}}, b"", "malformed list"),
    ({"k": "list", "v": [{"k": "plain", "v": None}, 3]}, b"", "malformed"),
    ({"k": "x" * 10_000}, b"", "unknown"),
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


def test_opaque_type_names_must_be_text():
    decode = protocol.Decoder(b"", _make_tensor).decode
    assert decode({"k": "opaque", "type": [[["x"]]]}) == ("opaque", "?")
    evil = "Evil\x1b[2J\ud800" + "x" * 500
    assert decode({"k": "opaque", "type": evil}) == ("opaque", "Evil\ufffd[2J\ufffd" + "x" * 90 + "…")


# --- loads: JSON from the other side -----------------------------------------------------------------------

DEEP = "[" * 20_000 + "]" * 20_000


@pytest.mark.parametrize("data, problem", [
    (DEEP, "nested too deeply"),
    (DEEP.encode(), "nested too deeply"),
    ('{"a": ' * 20_000 + "1" + "}" * 20_000, "nested too deeply"),
    ("[[[[1]]]]", "nested too deeply"),  # above max_depth=3 but far below the C decoder's recursion limit
    ('{"a": [{"b": {}}]}', "nested too deeply"),
    ('{"n": ' + "9" * 5000 + "}", "more than 20 digits"),
    ("[-" + "9" * 21 + "]", "more than 20 digits"),
    ('["\\ud800"]', "lone surrogate"),
    ('{"\\udfff": 1}', "lone surrogate"),
    ('"\\ude00\\ud83d"', "lone surrogate"),  # a pair in the wrong order
    ('["\ud800"]', "lone surrogate"),  # a str argument holding one already
    (b'{"a": "\xff"}', "not UTF-8"),
    (b'"\xed\xa0\x80"', "not UTF-8"),  # a surrogate encoded as if it were UTF-8
    ('{"a": 1'.encode("utf-16"), "not UTF-8"),  # json.loads alone would decode this
    ("{not json", "Expecting"),
    ("", "Expecting"),
    (b"\xef\xbb\xbf{}", "BOM"),
])
def test_loads_refuses_with_value_error_only(data, problem):
    with pytest.raises(ValueError, match=problem):
        protocol.loads(data, max_depth=3)


def test_loads_accepts_ordinary_json():
    text = '{"a": [1, -2, 3.5e300, NaN, null, true, "\\ud83d\\ude00 é", {"b": []}], "n": 12345678901234567890}'
    value = protocol.loads(text.encode(), max_depth=4)
    assert value["a"][6] == "\U0001F600 é" and value["n"] == 12345678901234567890
    assert protocol.loads("[]", max_depth=1) == [] and protocol.loads("5", max_depth=0) == 5
    assert protocol.loads('[{"k": 1}]', max_depth=2, max_int_digits=1) == [{"k": 1}]


def test_recv_refuses_hostile_headers_with_protocol_errors_only():
    hostile = [DEEP.encode(), b'{"v": ' + b"1" * 5000 + b"}", b'{"v": "\\ud800"}', b'{"v": "\xc3\x28"}',
               b"\xff" * 10, b'["not", "an", "object"]', b"", b'{"v": ' * 100 + b"1" + b"}" * 100]
    a, b = socket.socketpair()
    with a, b:
        for head in hostile:
            a.sendall(protocol.PREFIX.pack(len(head), 0) + head)
            with pytest.raises(protocol.ProtocolError):
                protocol.recv(b, deadline=time.monotonic() + 5)


def test_the_deepest_value_the_encoder_accepts_passes_recv():
    deepest = torch.arange(3.0)
    for level in range(protocol.MAX_NESTING):  # lists and dicts: a dict node's value is one level deeper
        deepest = {"x": deepest} if level % 2 else [deepest]
    encoder = protocol.Encoder(_tensor_bytes)
    node = encoder.encode(deepest)
    with pytest.raises(protocol.ProtocolError, match="too deeply"):
        protocol.Encoder(_tensor_bytes).encode([deepest])
    a, b = socket.socketpair()
    with a, b:
        protocol.send(a, {"id": 1, "ok": True, "value": node, "forbidden": []}, encoder.blobs)
        header, payload = protocol.recv(b, deadline=time.monotonic() + 5)
    value = protocol.Decoder(payload, _make_tensor).decode(header["value"])
    for _ in range(protocol.MAX_NESTING):
        value = value[0] if isinstance(value, list) else value["x"]
    assert torch.equal(value, torch.arange(3.0))


def test_a_lone_surrogate_sent_by_the_child_arrives_replaced():
    """The child's exception messages are the student's text: pack replaces what loads would refuse, so one
    odd string does not turn an answer into a protocol error."""
    a, b = socket.socketpair()
    with a, b:
        protocol.send(a, {"ready": True, "errors": [{"message": "bad \ud800 byte \udcff"}], "names": ["\ud83d"]})
        header, _ = protocol.recv(b, deadline=time.monotonic() + 5)
    assert header == {"ready": True, "errors": [{"message": "bad ? byte ?"}], "names": ["?"]}


# --- clean_text ----------------------------------------------------------------------------------------------

class Unprintable:
    def __str__(self):
        raise RuntimeError("no")


@pytest.mark.parametrize("value, limit, expected", [
    ("plain text\n\tindented", 100, "plain text\n\tindented"),
    ("lone \ud800 and \udcff", 100, "lone \ufffd and \\xff"),  # \udcff: the byte 0xff, as os.fsdecode gives it
    ("caf\udce9" * 10, 12, "caf\\xe9caf\\…"),
    ("\x1b[2J\x07bell\x00nul\x7f", 100, "\ufffd[2J\ufffdbell\ufffdnul\ufffd"),
    ("windows\r\nold mac\rend", 100, "windows\nold mac\nend"),
    ("\u202eevil\u202c \x85 \u2028", 100, "\ufffdevil\ufffd \ufffd \n"),
    ("no\u00a0break, é, 漢字, \U0001F600", 100, "no break, é, 漢字, \U0001F600"),
    ("x" * 50, 10, "x" * 9 + "…"),
    ("x" * 10, 10, "x" * 10),
    ("anything", 0, ""),
    (None, 10, "None"),
    (12, 10, "12"),
    ([1, "\ud800"], 20, "[1, '\\ud800']"),
    (Unprintable(), 50, "<Unprintable>"),
])
def test_clean_text(value, limit, expected):
    assert protocol.clean_text(value, limit) == expected


def test_clean_text_survives_values_whose_str_fails():
    deep = []
    for _ in range(100_000):
        deep = [deep]
    assert protocol.clean_text(deep, 10) == "<list>"
    assert protocol.clean_text(10 ** 5000, 10) in ("<int>", "1" + "0" * 8 + "…")
    text = protocol.clean_text("".join(map(chr, range(0x110000))), 2_000_000)
    assert len(text) <= 2_000_000 and text.encode("utf-8")


def test_one_line_is_clean_text_without_line_breaks_or_tabs():
    assert protocol.one_line("a\r\nb\tc\x1b[2Jd\ud800", 100) == "a b c\ufffd[2Jd\ufffd"
    assert protocol.one_line("x" * 10, 5) == "xxxx…"


def test_the_child_reads_the_graders_messages_without_the_hostile_input_walk(monkeypatch):
    """What the grader's `pack` wrote has nothing `loads` guards against, so the child (which reads hundreds of
    requests per submission) does not walk every header for it; the sizes are still checked."""
    def walked(*_args):
        raise AssertionError("the hostile-input walk ran")

    monkeypatch.setattr(protocol, "_check_tree", walked)
    monkeypatch.setattr(protocol, "_parse_int", walked)
    encoder = protocol.Encoder(_tensor_bytes)
    request = {"id": 12, "op": "call", "name": "f", "args": encoder.encode([torch.arange(4.0), 3, "é", {"k": [1.5]}])}
    a, b = socket.socketpair()
    with a, b:
        protocol.send(a, request, encoder.blobs)
        header, payload = protocol.recv_from_grader(b)
        assert header == request
        assert torch.equal(protocol.Decoder(payload, _make_tensor).decode(header["args"])[0], torch.arange(4.0))
        a.sendall(protocol.PREFIX.pack(protocol.MAX_HEADER_BYTES + 1, 0))
        with pytest.raises(protocol.ProtocolError, match="too large"):
            protocol.recv_from_grader(b)


def test_only_the_child_reads_without_the_hostile_input_walk():
    """The grader reads everything the child sends with `recv`, every check made."""
    from autograder import PACKAGE_DIR

    readers = {path.relative_to(PACKAGE_DIR).as_posix() for path in PACKAGE_DIR.rglob("*.py")
               if "recv_from_grader(" in path.read_text()}
    assert readers and all(r.startswith("child/") or r == "protocol.py" for r in readers), readers
