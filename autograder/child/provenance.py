"""Torch's own implementations refused by what they are, not by the name a student reaches them under.

The rule: student code reaches torch through its public API.  Three kinds of code are torch's own
implementation, whatever name, object or file they are reached through:

- every Python function defined in torch's private implementation namespaces (PRIVATE: the reference
  implementations, decompositions and primitives, the quantization stack with its own multi-head attention,
  the internal test helpers, the compiler and exporter back ends).  In the zygote, before any child exists,
  each has its code object swapped for one that refuses (`neutralise_private`), so every reference to it
  (a module attribute, a method, a table entry, a copy under another name) is refused alike; a module of
  these namespaces not yet imported cannot be imported by the submission (the audit hook below);
- the Python functions that implement the rubric's forbidden operations in torch's public modules (such as
  torch.nn.functional.multi_head_attention_forward), found by their defining module and name before the
  student's first line and swapped the same way (`neutralise_graded`);
- torch's own code compiled or executed afresh: every code object the submission compiles, builds, unmarshals
  or executes is compared, nested functions included, with the fingerprints (bytecode, names, constants) of
  all of the above, so torch's source read with `inspect` or `ast` and compiled under another name, or a
  module reloaded, is refused like the original.  A copy the student edited is a copying question, not this
  module's: it runs, and is theirs to answer for.

Native code is refused once the submission runs: ctypes library loads, symbol lookups and casts from raw
addresses or buffers, and the import of a compiled extension that is neither the interpreter's nor part of
a package already imported.  So is running another program, since a fresh interpreter has none of these
rules: the hook refuses it with a reason, and the seccomp filter refuses execve whoever asks.  CPython's
audit hooks (PEP 578) carry all of it: no Python code can remove one, and the hook never calls anything the
submission defined.  What no hook sees: ctypes objects that
already exist (torch imports ctypes) reading or writing memory directly (docs/security.md, "Torch's own
implementations").
Each refusal goes through `refuse(route)` (autograder.child.forbidden.refuse_route), which tells the op
recorder (the part scores 0, the message names the route) and raises, so the call fails on its own and the
grade does not need the child's word.
"""
from __future__ import annotations

import errno
import functools
import gc
import importlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import types
from typing import Any, Callable, Iterable

# torch's private implementation namespaces, as folders of the torch package
PRIVATE = ("_refs", "_decomp", "_prims", "_higher_order_ops", "ao", "nn/quantizable", "nn/quantized",
           "nn/intrinsic", "nn/qat", "testing/_internal", "_inductor", "onnx")
AFRESH = "torch's own code, "
MIN_FINGERPRINT_BYTES = 96  # smaller bodies (return x, super().__init__(), a loop over len) are everyone's
NATIVE_EVENTS = frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function",
                           "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.addressof", "ctypes.string_at",
                           "ctypes.wstring_at"})
# running another program: the seccomp filter refuses execve itself; refusing it here first says why, as an OSError,
# which is what libraries that try a helper program (matplotlib's fc-list) expect and handle
PROGRAM_EVENTS = frozenset({"os.exec", "os.posix_spawn", "os.system", "subprocess.Popen"})
# ctypes is refused through its own audit events (library loads, symbol lookups); cffi raises none, and would
# load libtorch's C shim (its own flash attention) or any other library unseen
FOREIGN_FUNCTION_INTERFACES = frozenset({"_cffi_backend", "cffi"})
EXTENSION_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)
IMPORT_MACHINERY = ("<frozen importlib.", os.path.dirname(importlib.__file__) + os.sep)


def _torch_root() -> str:
    import torch

    return os.path.dirname(torch.__file__) + os.sep


def _private_folders() -> tuple[str, ...]:
    root = _torch_root()
    return tuple(os.path.join(root, *p.split("/")) + os.sep for p in PRIVATE)


def fingerprint(code: types.CodeType) -> tuple | None:
    """What a compilation of the same source gives whatever the names of the function, its file and its
    locals: the bytecode, the global and attribute names, the constants (nested code by its own print)."""
    if len(code.co_code) < MIN_FINGERPRINT_BYTES or code.co_name.startswith("<"):
        return None  # a lambda, comprehension or module body, or a few lines: everyone writes those alike
    consts = tuple(("code", fingerprint(c)) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
                   for c in code.co_consts)
    return code.co_code, code.co_names, consts


def nested_codes(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from nested_codes(const)


class Returned(BaseException):
    """How the audit hook hands a gated call's result back to the gate (a hook cannot return a value)."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


_KEY, _ROUTE = -987654321, "<route>"  # placeholders in the templates, replaced by each function's own


@functools.cache
def _template(free: int, gated: bool) -> types.CodeType:
    """The code swapped in for a function with `free` free variables (a function's code may only be swapped
    for one with as many).  Refusing: it refuses.  Gated: it asks the audit hook, which alone holds the
    original, to run the call; the hook answers through Returned, or refuses."""
    names = [f"_cell{i}" for i in range(free)]
    body = (f"        try:\n            __autograder_audit__('autograder.gate', {_KEY}, args, kwargs)\n"
            f"        except __autograder_returned__ as returned:\n            return returned.value\n"
            if gated else "")
    source = ("def outer():\n" + "".join(f"    {n} = None\n" for n in names) +
              "    def refuse(*args, **kwargs):\n" + (f"        {', '.join(names)}\n" if names else "") + body +
              f"        __autograder_refused__({_ROUTE!r})\n    return refuse\n")
    namespace: dict[str, Any] = {}
    exec(compile(source, "<refused>", "exec"), namespace)
    return namespace["outer"]().__code__


def _swapped_code(route: str, free: int, key: int | None) -> types.CodeType:
    template = _template(free, key is not None)
    consts = tuple(route if c == _ROUTE else key if c == _KEY and key is not None else c
                   for c in template.co_consts)
    return template.replace(co_consts=consts)


class Index:
    """Torch's Python functions, public ones by the first name of their qualified name, and the private ones
    still to refuse.  Built in the zygote; `scan` adds what later imports defined (the garbage collector lists
    only objects made since the zygote froze its imports)."""

    def __init__(self, scan: bool = True) -> None:
        self.by_head: dict[str, list[types.FunctionType]] = {}
        self.private: list[tuple[types.FunctionType, str]] = []
        self.prints: set[tuple] = set()
        self.bytecodes: set[bytes] = set()
        # key -> (the original, its name, its route, the gate's code): handed to the audit hook, then dropped
        self.gated: dict[int, tuple[types.FunctionType, str, str, types.CodeType, bool]] = {}
        self.keys = 0
        self.scans = 0
        if scan:
            self.scan()

    def scan(self) -> None:
        self.scans += 1
        root, private = _torch_root(), _private_folders()
        for obj in gc.get_objects():
            if type(obj) is not types.FunctionType or not obj.__code__.co_filename.startswith(root):
                continue
            if obj.__code__.co_filename.startswith(private):
                self.private.append((obj, f"{getattr(obj, '__module__', None) or 'torch'}.{obj.__qualname__}"))
            else:
                self.by_head.setdefault(obj.__qualname__.split(".", 1)[0], []).append(obj)


INDEX: Index | None = None


def _swap(functions: Iterable[tuple[types.FunctionType, str]], refuse: Callable[[str], Any], index: Index,
          gate_module_functions: bool) -> int:
    """Swaps each function's code.  With `gate_module_functions` (torch's private namespaces), each is gated
    rather than refused: torch's own code keeps using its private helpers (torch.broadcast_shapes calls
    torch._refs._broadcast_shapes by name; a lazily imported module registers itself), and those calls go on."""
    swapped = 0
    for function, route in functions:
        code = function.__code__
        if code.co_filename == "<refused>":
            continue
        for nested in nested_codes(code):
            if (print_ := fingerprint(nested)) is not None:
                index.prints.add(print_)
                index.bytecodes.add(nested.co_code)
        key = None
        if gate_module_functions:
            key, index.keys = index.keys, index.keys + 1
            original = types.FunctionType(code, function.__globals__, function.__name__, function.__defaults__,
                                          function.__closure__)
            original.__kwdefaults__ = function.__kwdefaults__
        function.__globals__.setdefault("__autograder_refused__", refuse)
        function.__globals__.setdefault("__autograder_audit__", sys.audit)
        function.__globals__.setdefault("__autograder_returned__", Returned)
        function.__code__ = _swapped_code(route, len(code.co_freevars), key)
        if key is not None:
            # a module-level function answers torch's code that names it; a method or nested function only
            # torch's private code (public machinery such as Module.__call__ would call any object's forward)
            anyone = "." not in function.__qualname__
            index.gated[key] = (original, function.__name__, route, function.__code__, anyone)
        swapped += 1
    return swapped


def neutralise_private(refuse: Callable[[str], Any]) -> int:
    """Every function of torch's private namespaces imported so far refuses from now on (the zygote calls
    this after its imports, and again after a rubric's preload); the first call installs the audit hook,
    which answers the gates from then on.  Returns how many were swapped."""
    global INDEX
    if INDEX is None:
        INDEX = Index()
        _install(refuse)
    else:
        INDEX.scan()
    private, INDEX.private = INDEX.private, []
    swapped = _swap(private, refuse, INDEX, gate_module_functions=True)
    _absorb()
    return swapped


def graded_functions(patterns: Iterable[str], home: str) -> tuple[tuple[types.FunctionType, str], ...]:
    """The Python functions of torch's public modules under `home` whose qualified name's first part matches
    one of `patterns` (a function, or a class: all its methods), with their routes (what
    autograder.child.forbidden.python_plan works out once, in the zygote)."""
    index = INDEX or Index()
    from autograder.child.forbidden import matcher

    matches = matcher(patterns)
    return tuple((function, f"{function.__module__}.{function.__qualname__}")
                 for head, functions in index.by_head.items() if matches(head)
                 for function in functions if (function.__module__ or "").startswith(home))


def neutralise_graded(chosen: Iterable[tuple[types.FunctionType, str]], refuse: Callable[[str], Any]) -> list[str]:
    """In the child, before the student's first line: the functions `graded_functions` chose refuse from now
    on.  Returns their routes."""
    chosen = list(chosen)
    _swap(chosen, refuse, INDEX or Index(scan=False), gate_module_functions=False)
    _absorb()
    return [route for _, route in chosen]


def index_scans() -> int:
    """How many times the index has looked for torch's functions (0 before it exists): what it holds changes
    only then."""
    return INDEX.scans if INDEX is not None else 0


def _codes_refused(codes: Iterable[types.CodeType], prints: set[tuple]) -> bool:
    return any(fingerprint(c) in prints for code in codes for c in nested_codes(code))


def _absorb() -> None:
    """Replaced by _install: hands what the index gathered to the hook."""


def enforce() -> None:
    """Replaced by _install: from now on the rule holds (a one-way switch; the child throws it just before
    the student's first line)."""


def _install(refuse: Callable[[str], Any]) -> None:
    """The audit hook, once per process (the zygote's, inherited by every child).  It answers the gates from
    the start; once `enforce` is called it also refuses torch's own code compiled or run afresh, native
    code, and private modules the submission imports."""
    global _absorb, enforce
    prints: set[tuple] = set()
    bytecodes: set[bytes] = set()
    gated: dict[int, tuple[types.FunctionType, str, str, types.CodeType, bool]] = {}  # only the hook holds these
    private_modules = tuple(f"torch.{p.replace('/', '.')}" for p in PRIVATE)
    enforcing: dict[str, Any] = {}  # once enforced: the extension files already loaded, the installed homes
    busy = [False]  # the hook's own compile and loads raise events too
    torch_root, private = _torch_root(), _private_folders()

    def absorb() -> None:
        if enforcing and not busy[0]:
            refuse("the kit's own index")  # after the switch only the hook itself adds to what it holds
        gated.update(INDEX.gated)
        INDEX.gated = {}
        prints.update(INDEX.prints)
        bytecodes.update(INDEX.bytecodes)

    def switch_on() -> None:
        if enforcing:
            return
        files = [m.__file__ for m in list(sys.modules.values()) if type(getattr(m, "__file__", None)) is str]
        enforcing["loaded"] = frozenset(f for f in files if f.endswith(EXTENSION_SUFFIXES))
        # the interpreter's own extensions and the installed packages' (matplotlib's, imported by a plot cell)
        # are the course's software; a file anywhere else (one the submission wrote) is new native code
        enforcing["homes"] = tuple({os.path.join(os.path.dirname(os.__file__), "lib-dynload") + os.sep} |
                                   {os.path.realpath(p) + os.sep for p in sys.path if p.endswith("site-packages")})

    def caller_outside_importlib(frame: types.FrameType | None) -> types.FrameType | None:
        while frame is not None and frame.f_code.co_filename.startswith(IMPORT_MACHINERY):
            frame = frame.f_back
        return frame

    def torch_imports(name: str) -> bool:
        """Torch itself imports one of its own modules lazily (Adam's first step imports parts of
        torch._decomp and torch.onnx): imported here, unchecked (it is torch's, from torch's files), and
        whatever of torch's private namespaces it brought is swapped before the import returns to torch.
        False, and nothing done, for a module that is not a file of torch's (a folder the submission added
        to a search path)."""
        if not name.startswith("torch."):
            return False
        busy[0] = True
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        finally:
            busy[0] = False
        if spec is None or not str(spec.origin).startswith(torch_root):
            return False
        before = sum(1 for m in list(sys.modules) if m.startswith(private_modules))
        busy[0] = True
        try:
            importlib.import_module(name)
            if sum(1 for m in list(sys.modules) if m.startswith(private_modules)) != before:
                neutralise_private(refuse)
        finally:
            busy[0] = False
        return True

    def hook(event: str, args: tuple) -> None:
        if event == "autograder.gate":
            key = args[0]
            entry = gated.get(key) if type(key) is int else None
            gate = sys._getframe(1)
            if entry is None or gate.f_code is not entry[3]:
                return  # not asked by a gate (the submission's own sys.audit): nothing happens
            original, name, route, _, anyone = entry
            caller = gate.f_back
            # torch's own code (only the import system makes code under torch's file names) calling it by name
            where = caller.f_code.co_filename if caller is not None else ""
            if where.startswith(private if not anyone else torch_root) and name in caller.f_code.co_names:
                raise Returned(original(*args[1], **args[2]))
            refuse(route)
        if busy[0] or not enforcing:
            return
        loaded, native_homes = enforcing["loaded"], enforcing["homes"]
        if event in NATIVE_EVENTS:
            refuse(f"native code ({event})")
        if event in PROGRAM_EVENTS:
            raise PermissionError(errno.EPERM, f"running another program ({event}) is off-limits in this "
                                  "assignment: it would not be graded by the assignment's rules")
        if event == "import":
            name, filename = args[0], args[1]
            if type(name) is str and name not in sys.modules:
                importer = caller_outside_importlib(sys._getframe(1))
                if importer is not None and importer.f_code.co_filename.startswith(torch_root) \
                        and torch_imports(name):
                    return
                if name.startswith(private_modules):
                    refuse(name)
                if name.partition(".")[0] in FOREIGN_FUNCTION_INTERFACES:
                    refuse(f"native code (a foreign function interface, {name})")
            if (type(filename) is str and filename.endswith(EXTENSION_SUFFIXES) and filename not in loaded
                    and not filename.startswith(native_homes)):
                refuse(f"native code (a compiled extension, {os.path.basename(filename)})")
        elif event == "exec":
            if type(args[0]) is types.CodeType and _codes_refused([args[0]], prints):
                refuse(AFRESH + "run afresh")
        elif event == "code.__new__":
            if type(args[0]) is bytes and args[0] in bytecodes:
                refuse(AFRESH + "rebuilt")
            if type(args[1]) is str and args[1].startswith(torch_root):
                refuse(AFRESH + "rebuilt under its file name")
        elif event in ("compile", "marshal.loads"):
            busy[0] = True
            try:
                made = _compiled(event, args)
            finally:
                busy[0] = False
            if _codes_refused(made, prints):
                refuse(AFRESH + "compiled afresh")
            # only the import system makes code that claims to be torch's: the file then is torch's, on disk
            claimed = [args[1]] if event == "compile" else [c.co_filename for c in made]
            if any(type(f) is str and f.startswith(torch_root) for f in claimed):
                compiler = sys._getframe(1)
                if not compiler.f_code.co_filename.startswith(IMPORT_MACHINERY):
                    refuse(AFRESH + "compiled under its file name")
        elif event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
            refuse(f"the garbage collector's object lists ({event})")

    sys.addaudithook(hook)
    _absorb, enforce = absorb, switch_on


def _compiled(event: str, args: tuple) -> list[types.CodeType]:
    """The code objects a compile or marshal.loads event would make; only exact built-in types are looked at,
    so nothing the submission defined runs inside the hook."""
    source = args[0]
    if event == "marshal.loads":
        if type(source) is not bytes:
            return []
        try:
            loaded = marshal.loads(source)
        except (ValueError, EOFError, TypeError):
            return []
        return [loaded] if type(loaded) is types.CodeType else []
    if type(source) not in (str, bytes):
        import ast

        if not isinstance(source, ast.AST) or type(source).__module__ != "ast":
            return []
    for mode in ("exec", "eval"):
        try:
            code = compile(source, "<checked>", mode, dont_inherit=True)
        except (SyntaxError, ValueError, TypeError):
            continue
        return [code] if type(code) is types.CodeType else []
    return []
