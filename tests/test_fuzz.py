"""Property tests for what reads hostile input on the trusted side: whatever arrives, each reader returns or
raises only the exceptions its callers handle.  Anything else (RecursionError, a ValueError from int(), a
UnicodeEncodeError when printing) would escape as a traceback and end the grading run."""
import json
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autograder import protocol
from autograder.grading.result import GradeResult
from autograder.model.load_report import Notice, NoticeKind
from autograder.host.remote import _make_tensor
from autograder.grading.results_json import gradescope, summary
from autograder.grading.rubric import Part, PartScore
from autograder.grading.rubric import TestScore as Score  # not collected as a test class
from autograder.host.source_cells import UnreadableSubmission, read_cells

# no example database: it would be written into the working tree
FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
RECV_ERRORS = (protocol.Timeout, EOFError, OSError, protocol.ProtocolError)

# text with everything the child can put in a string: lone surrogates, control characters, escapes
any_text = st.text(st.characters(exclude_categories=()), max_size=20)
scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-10 ** 40, max_value=10 ** 40)
           | st.floats() | any_text)
json_values = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(any_text, children, max_size=4), max_leaves=25)

# JSON text that json.dumps would not write: integers of thousands of digits, escaped lone surrogates,
# constants, nesting far past the limits; all of it valid JSON that the trusted side must still refuse
digits = st.builds(lambda sign, d: sign + (d.lstrip("0") or "0"), st.sampled_from(["", "-"]),
                   st.text("0123456789", min_size=1, max_size=6000))
raw_scalars = st.one_of(digits, scalars.map(json.dumps), st.sampled_from(
    ['"\\ud800"', '"\\udfff\\ud800"', '"\\ud83d\\ude00"', '"\x1b[2J"', "NaN", "-Infinity", "1e999999"]))
raw_json = st.recursive(raw_scalars, lambda children: st.lists(children, max_size=4).map(
    lambda items: "[" + ",".join(items) + "]") | st.lists(st.tuples(any_text, children), max_size=4).map(
    lambda pairs: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in pairs) + "}"), max_leaves=20)
nesting = st.integers(min_value=0, max_value=30) | st.sampled_from([1000, 5000, 25_000])


def _nested(text: str, levels: int, as_object: bool) -> str:
    return ('{"v":' * levels + text + "}" * levels) if as_object else ("[" * levels + text + "]" * levels)


def _recv_all(data: bytes) -> None:
    """Feeds `data` to recv as the child's side of the socket, then closes it, so recv ends in EOF at worst.
    A thread writes: a large header would fill the socket's buffer before anything reads it."""
    a, b = socket.socketpair()

    def write() -> None:
        with a:
            try:
                a.sendall(data)
            except OSError:  # recv refused a message and the reading end closed
                pass

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with b:
            for _ in range(len(data) + 1):
                try:
                    header, payload = protocol.recv(b, deadline=time.monotonic() + 5)
                except RECV_ERRORS:
                    return
                assert type(header) is dict and type(payload) is bytes
    finally:
        writer.join()


def _framed(head: bytes, payload: bytes = b"") -> bytes:
    return protocol.PREFIX.pack(len(head), len(payload)) + head + payload


@FUZZ
@given(st.binary(max_size=2000))
def test_recv_on_arbitrary_bytes(data):
    _recv_all(data)


@FUZZ
@given(st.binary(max_size=500), st.binary(max_size=100))
def test_recv_on_arbitrary_headers(head, payload):
    _recv_all(_framed(head, payload))


@FUZZ
@given(json_values, st.booleans(), nesting)
def test_recv_on_structured_headers(value, ascii_only, levels):
    """Well-formed frames holding JSON that is wrong in shape: deep, not an object, lone surrogates (escaped,
    or encoded as if they were UTF-8)."""
    head = _nested(json.dumps(value, ensure_ascii=ascii_only), levels, as_object=True)
    _recv_all(_framed(head.encode("utf-8", "surrogatepass")))


@FUZZ
@given(raw_json, nesting, st.booleans())
def test_recv_on_hostile_json_headers(text, levels, as_object):
    _recv_all(_framed(_nested(text, levels, as_object).encode("utf-8", "surrogatepass")))


dtypes = st.sampled_from(sorted(protocol.DTYPES)) | json_values
shapes = st.lists(st.integers(min_value=-2, max_value=5) | st.booleans() | json_values, max_size=4) | json_values
leaf_nodes = st.fixed_dictionaries(
    {"k": st.sampled_from(["plain", "int", "float", "opaque", "tensor", "pickle"]) | json_values},
    optional={"v": json_values | st.sampled_from(["7", "-1", "1e5", "nan", "inf", "x", " 1_0 "]),
              "type": json_values, "dtype": dtypes, "shape": shapes,
              "nbytes": st.integers(min_value=-1, max_value=64) | json_values})
nodes = st.recursive(leaf_nodes, lambda children: st.fixed_dictionaries({
    "k": st.sampled_from(["list", "dict"]),
    "v": st.lists(children, max_size=3) | st.dictionaries(any_text, children, max_size=3) | json_values}),
    max_leaves=12) | json_values


@FUZZ
@given(nodes, st.binary(max_size=80))
def test_decoder_raises_only_protocol_errors(node, payload):
    try:
        protocol.Decoder(payload, _make_tensor).decode(node)
    except protocol.ProtocolError:
        pass


def _loads_in_full(text: str, max_depth: int) -> object:
    """What protocol.loads does with every check run on every part of the text: the oracle for the one that
    looks only where the text can hold what the checks refuse."""
    try:
        value = json.loads(text, parse_int=lambda digits: protocol._parse_int(digits, 20))
    except RecursionError:
        raise protocol.JSONRejected("nested too deeply") from None
    protocol._check_tree(value, max_depth)
    return value


def _outcome(read, text: str, max_depth: int) -> tuple[str, str]:
    try:
        return "value", repr(read(text, max_depth))
    except ValueError as exc:
        return type(exc).__name__, str(exc)


@FUZZ
@given(json_values, raw_json, nesting, st.integers(min_value=0, max_value=40), st.booleans())
@example(value=[], raw='"\\ud800"', levels=0, max_depth=3, as_object=False)
@example(value=[], raw='[1,"\\ud83d\\ude00"]', levels=2, max_depth=3, as_object=True)
@example(value=[], raw="1" * 21, levels=3, max_depth=3, as_object=False)
def test_loads_refuses_exactly_what_checking_every_part_refuses(value, raw, levels, max_depth, as_object):
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False), _nested(raw, levels, as_object)):
        assert _outcome(protocol.loads, text, max_depth) == _outcome(_loads_in_full, text, max_depth), text[:200]


@FUZZ
@given(json_values, raw_json, nesting, st.integers(min_value=0, max_value=40))
def test_loads_raises_only_value_errors(value, raw, levels, max_depth):
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False), _nested(raw, levels, as_object=False)):
        try:
            protocol.loads(text.encode("utf-8", "surrogatepass"), max_depth)
        except ValueError:
            pass


@FUZZ
@given(st.one_of(any_text, json_values), st.integers(min_value=0, max_value=50))
def test_clean_text_is_printable_utf8_within_the_limit(value, limit):
    text = protocol.clean_text(value, limit)
    assert len(text) <= limit
    text.encode("utf-8")
    assert all(c.isprintable() or c in "\n\t\u200c\u200d" for c in text)


# --- reading submissions -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def folder():
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def _read(path: Path, content: bytes) -> None:
    path.write_bytes(content)
    try:
        cells = read_cells(path)
    except UnreadableSubmission as exc:
        message = str(exc)
        assert "\n" not in message and path.name in message
        message.encode("utf-8")
    else:
        assert cells and all(type(c) is str and "\r" not in c for c in cells)


@FUZZ
@given(st.binary(max_size=2000), st.sampled_from(["s.py", "s.ipynb"]))
def test_read_cells_on_arbitrary_bytes(folder, content, name):
    _read(folder / name, content)


code_sources = st.text(st.characters(exclude_categories=()), max_size=40)
cells = st.fixed_dictionaries(
    {"cell_type": st.sampled_from(["code", "markdown", "raw"]) | json_values},
    optional={"source": code_sources | st.lists(code_sources | json_values, max_size=4) | json_values,
              "metadata": json_values, "outputs": json_values})
notebooks = st.fixed_dictionaries({"cells": st.lists(cells | json_values, max_size=5) | json_values},
                                  optional={"metadata": json_values, "nbformat": json_values})


@FUZZ
@given(notebooks | json_values, st.booleans(), st.booleans())
def test_read_cells_on_arbitrary_json_notebooks(folder, notebook, ascii_only, bom):
    text = json.dumps(notebook, ensure_ascii=ascii_only)
    _read(folder / "s.ipynb", b"\xef\xbb\xbf" * bom + text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(raw_json, nesting, st.booleans(), st.lists(code_sources, max_size=3))
def test_read_cells_on_notebooks_with_hostile_json(folder, raw, levels, as_object, sources):
    code_cells = ",".join(json.dumps({"cell_type": "code", "source": source}) for source in sources)
    text = f'{{"cells": [{code_cells}], "metadata": {_nested(raw, levels, as_object)}}}'
    _read(folder / "s.ipynb", text.encode("utf-8", "surrogatepass"))


# --- reports -------------------------------------------------------------------------------------------------

@FUZZ
@given(st.lists(st.dictionaries(st.sampled_from(["cell", "type", "message"]), json_values), max_size=3),
       any_text, any_text, st.lists(any_text, max_size=3))
@example([{"cell": 3, "type": "ValueError", "message": "bad \ud800 text"}], "", "", [])  # crashed the CLI's print
def test_reports_of_hostile_text_print_and_serialise(errors, message, failure, notices):
    """Cell errors, check messages, load failures and notices all carry text the child chose."""
    part = Part(name="p", title="Part", points=1.0, suite="test_p.py")
    test = Score(part="p", name="t", score=0.0, max_score=1.0, passed=False, message=message, hints=(message,))
    parts = [PartScore(part=part, score=0.0, tests=[test], forbidden=("aten.layer_norm",))]
    result = GradeResult(submission="s\udcff.py", sha256="", assignment="a", parts=parts, max_score=1.0,
                         unreadable=message)
    result.load.cell_errors, result.load.failure = errors, failure
    result.load.notices = [Notice(kind, text) for kind, text in zip(NoticeKind, notices)]
    text = summary(result)
    text.encode("utf-8")
    json.dumps(gradescope(result), ensure_ascii=False).encode("utf-8")
