"""The shapes of the code the standard library generates, and of type expressions.

The dynamic-code guard lets the standard library compile code it makes itself, never what
the program hands it: each generating function is listed with a check of the source it
compiles (see ``dynamic``).
"""

from __future__ import annotations

from types import CodeType

from pysandboxes._inside.guards.values import plain_str

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

#: The standard library's own code generation: (module, function) -> a check of the
#: source that function compiles. Only the function that makes the code counts, never its
#: module as a whole: a module's other functions call what the program hands them
#: (``functools.singledispatch(exec)``, ``ast.NodeVisitor.visit``), and C functions have
#: no frame, so ``exec`` called by them looks called by their Python caller. The checks
#: hold whatever the program did to the module's globals (``collections._sys``,
#: ``rlcompleter.re``, ``site.io``): the source must be of the shape the function makes.
#: Everything else of the standard library that compiles source it is given (timeit,
#: doctest, pdb, cProfile, code...) only does what the program asks, and is judged as the
#: program.
# The shapes are matched by hand, not with ``re``: the guard's modules load at every start
# of the sandbox, and ``re`` (with ``enum``) would cost each one milliseconds. ``\w`` is a
# word character as ``re`` reads it in ``str`` patterns: ``isalnum()`` or ``_``.


def _word_run(text: str, start: int, extra: str = "") -> int:
    """The index after the run of word characters (and of ``extra``) from ``start``."""
    end = len(text)
    while start < end and (text[start].isalnum() or text[start] == "_" or text[start] in extra):
        start += 1
    return start


def _namedtuple_shape(text: str) -> bool:
    r"""``lambda _cls, [\w, ]*: _tuple_new\(_cls, \([\w, ]*\)\)``, the whole text."""
    head, middle = "lambda _cls, ", ": _tuple_new(_cls, ("
    if not text.startswith(head):
        return False
    at = _word_run(text, len(head), ", ")
    if not text.startswith(middle, at):
        return False
    return text[_word_run(text, at + len(middle), ", ") :] == "))"


_MOCK_BODIES = tuple(
    "(*args, **kwargs):\n    _checksig_(*args, **kwargs)\n"
    f"    return {awaited}mock(*args, **kwargs)"
    for awaited in ("", "await ")
)


def _mock_signature_shape(text: str) -> bool:
    r"""``(async )?def \w+`` and the body ``unittest.mock`` gives a signature's copy."""
    text = text.removeprefix("async ")
    if not text.startswith("def "):
        return False
    name_end = _word_run(text, 4)
    return name_end > 4 and text[name_end:] in _MOCK_BODIES


def _dotted_name_shape(text: str) -> bool:
    r"""``\w+(\.\w+)*``, the whole text."""
    return all(part and _word_run(part, 0) == len(part) for part in text.split("."))


def source_text(source: object) -> str | None:
    """The source a ``compile`` event carries, as a plain ``str`` (``None`` if it is
    not text: an AST or a code object). Bytes are read through the buffer, as
    ``compile`` reads them: a subclass's ``__bytes__`` is never called."""
    if issubclass(type(source), (bytes, bytearray)):
        return memoryview(source).tobytes().decode("utf-8", "replace")  # type: ignore[arg-type]
    return plain_str(source)


def _fullmatch(shape: Callable[[str], bool]) -> Callable[[object, FrameType], bool]:
    def check(source: object, frame: FrameType) -> bool:
        text = source_text(source)
        return text is not None and shape(text)

    return check


def _plain_names(maker: FrameType) -> bool:
    """Whether every field name ``dataclasses._process_class`` holds is an identifier, an
    exact ``str``: the names are pasted into the code it generates (formatted, so a
    ``str`` subclass would choose its own text), and a name such as
    ``"x,print(...)"``, set in a class's ``__annotations__``, would run."""
    fields: object = maker.f_locals.get("fields")
    if type(fields) is not dict:
        return False
    names: list[object] = list(fields)  # pyright: ignore[reportUnknownArgumentType]
    return all(type(name) is str and name.isidentifier() for name in names)


def _made_by(prefix: str, maker: str) -> Callable[[object, FrameType], bool]:
    """Source starting with ``prefix``, compiled while the module's ``maker`` builds it,
    through the module's own functions only, from fields with plain names. Called by the
    program, a generating function or its helpers run any body they are handed
    (``dataclasses._create_fn('f', [], [body], globals={})``, 3.13's ``_FuncBuilder``, or
    ``_init_fn`` with any ``self_name``); ``dataclasses._process_class`` hands them only
    field names, checked here."""

    def check(source: object, frame: FrameType) -> bool:
        text = source_text(source)
        if text is None or not text.startswith(prefix):
            return False
        filename = frame.f_code.co_filename
        caller = frame.f_back
        for _ in range(8):
            if caller is None or caller.f_code.co_filename != filename:
                return False
            if caller.f_code.co_name == maker:
                return _plain_names(caller)
            caller = caller.f_back
        return False

    return check


#: ``ast.PyCF_ONLY_AST``: with it, ``compile`` returns a tree, never code.
_ONLY_AST = 0x400


def _parse_only(source: object, frame: FrameType) -> bool:
    """ast.parse asks for a tree: running it needs a compile() of the program. Only if
    the flags it hands ``compile`` do ask for a tree: they come from ``ast``'s globals,
    which the program may rewrite (``ast.PyCF_ONLY_AST = 0`` made it return code)."""
    flags = frame.f_locals.get("flags")
    return type(flags) is int and flags & _ONLY_AST != 0


GENERATING: dict[tuple[str, str], Callable[[object, FrameType], bool]] = {
    ("ast", "parse"): _parse_only,
    ("collections", "namedtuple"): _fullmatch(_namedtuple_shape),
    # Field names are pasted into the code (docs/security.md lists it).
    ("dataclasses", "_create_fn"): _made_by("def __create_fn__(", "_process_class"),
    ("dataclasses", "add_fns_to_class"): _made_by("def __create_fn__(", "_process_class"),
    ("unittest", "_set_signature"): _fullmatch(_mock_signature_shape),
    ("unittest", "_set_async_signature"): _fullmatch(_mock_signature_shape),
    ("rlcompleter", "attr_matches"): _fullmatch(_dotted_name_shape),
}


#: How deep a frame's code is searched for an annotation string: a module's code holds a
#: class body's, which holds its methods' (and a nested class's).
_DEPTH = 4


def _holds(code: CodeType, source: str, depth: int) -> bool:
    for constant in code.co_consts:
        if type(constant) is str and constant == source:
            return True
        if depth and type(constant) is CodeType and _holds(constant, source, depth - 1):
            return True
    return False


def written_in_a_file(source: object, frame: FrameType | None) -> bool:
    """Whether ``source`` is text written in a source file run on the stack under
    ``frame``: a string constant of the code of one of the frames there (or of a class
    body or function that code holds), and that code read from a file. An annotation of
    a class being defined (``from __future__ import annotations``, or a quoted forward
    reference) is such text, whoever's file holds it: evaluating it runs what that file
    states. A string made at run time (read, received, built from parts) is found in no
    code, unless the same text is written there.
    """
    text = source_text(source)
    if text is None:
        return False
    for _ in range(256):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_filename.startswith("/") and _holds(code, text, _DEPTH):
            return True
        frame = frame.f_back
    return False


_NOT_IN_TYPE_EXPRESSIONS = frozenset("():;=@{}\\\n!%&*+<>^~")


def looks_like_a_type(source: object) -> bool:
    """Whether ``source`` can only be a type expression: no call, no statement.

    ``typing`` evaluates the strings of forward references; without parentheses, ``:``,
    ``=`` and the like, such a string can name and subscript things, never run a call.
    """
    if type(source) is bytes:
        source = source.decode("utf-8", "replace")  # type: ignore[union-attr]
    return type(source) is str and _NOT_IN_TYPE_EXPRESSIONS.isdisjoint(source)  # type: ignore[arg-type]
