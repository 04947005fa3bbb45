"""Calls with no frame of the program's, taken for the interpreter's own.

With no Python frame on the stack (an ``atexit`` callback, a function started by
``_thread.start_new_thread``, a finalizer run at shutdown) the dynamic-code and import
guards decided "C code, the interpreter itself" and let the call through:
``atexit.register(exec, src, {})`` ran a string without a ``dynamic-code`` grant, and
``atexit.register(__import__, "wave")`` imported a module no rule allows. A library frame
that called what it was handed (a thread's target, a finalizer, a finder the program put
on ``sys.meta_path``) counted as the library importing for itself, the same way.

Now a call with no program frame is the program's: the interpreter's own work is
recognised positively (its prompt compiles with no source object to hand; C importing a
module already loaded for a library that called it; the runner's own import statements,
from its frames alone), and a library or the import machinery calling a function its
code does not name is looked through, to the program.
"""

from __future__ import annotations

import pytest
from escapelab import Lab, got

#: Runs a string as code: printing RAN shows it ran.
SOURCE = "print('RAN', flush=True)"

DYNAMIC = {
    "atexit": f"import atexit\natexit.register(exec, {SOURCE!r}, {{}})",
    "start_new_thread": (
        f"import _thread, time\n_thread.start_new_thread(exec, ({SOURCE!r}, {{}}))\ntime.sleep(1)"
    ),
    "thread_target": (
        f"import threading\nt = threading.Thread(target=exec, args=({SOURCE!r}, {{}}))\n"
        "t.start()\nt.join()"
    ),
    "weakref_finalize": (
        "import weakref\nclass Box: pass\nbox = Box()\n"
        f"weakref.finalize(box, exec, {SOURCE!r}, {{}})\ndel box"
    ),
    # A dict whose __del__ runs a string in itself; collected at shutdown, with no frame.
    "del_at_shutdown": (
        "import functools\nclass Namespace(dict):\n"
        f"    __del__ = functools.partial(exec, {SOURCE!r}, {{}})\n"
        "keep = Namespace()"
    ),
}


@pytest.mark.parametrize("route", list(DYNAMIC))
def test_cant_run_a_string_with_no_frame_of_the_program(lab: Lab, route: str) -> None:
    code = DYNAMIC[route] + "\n"
    control = lab.control(code)
    assert "RAN" in control.stdout, control.stdout + control.stderr
    result = lab.run_sandboxed(code)
    assert "RAN" not in result.stdout, result.stdout + result.stderr
    assert "RuleApiPermissionError" in result.stderr, result.stderr


#: Imports ``wave`` (which no rule allows) with no frame of the program's on the stack,
#: then says whether it got loaded.
LOADED = "import sys\nprint('LOADED', 'wave' in sys.modules, flush=True)"
IMPORTS = {
    "atexit": (
        "import atexit, sys\n"
        "atexit.register(lambda: print('LOADED', 'wave' in sys.modules, flush=True))\n"
        "atexit.register(__import__, 'wave')"
    ),
    "start_new_thread": (
        "import _thread, time\n_thread.start_new_thread(__import__, ('wave',))\n"
        f"time.sleep(1)\n{LOADED}"
    ),
    "thread_target": (
        "import threading\nt = threading.Thread(target=__import__, args=('wave',))\n"
        f"t.start()\nt.join()\n{LOADED}"
    ),
    "weakref_finalize": (
        "import weakref\nclass Box: pass\nbox = Box()\n"
        f"weakref.finalize(box, __import__, 'wave')\ndel box\n{LOADED}"
    ),
    "executor": (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor() as pool:\n"
        "    try:\n        pool.submit(__import__, 'wave').result()\n"
        "    except ImportError as exc:\n        print('REFUSED', type(exc).__name__)\n"
        f"{LOADED}"
    ),
    "import_module_in_a_thread": (
        "import importlib, threading\n"
        "t = threading.Thread(target=importlib.import_module, args=('wave',))\n"
        f"t.start()\nt.join()\n{LOADED}"
    ),
    # A finder the program put on sys.meta_path: the import system calls it while it looks
    # for a module no other finder has.
    "meta_path_finder": (
        "import functools, sys, types\n"
        "finder = types.SimpleNamespace(find_spec=functools.partial(__import__, 'wave'))\n"
        "sys.meta_path.append(finder)\n"
        "try:\n    import no_such_module\nexcept Exception as exc:\n"
        "    print('REFUSED', type(exc).__name__)\n"
        f"sys.meta_path.remove(finder)\n{LOADED}"
    ),
}


@pytest.mark.parametrize("route", list(IMPORTS))
def test_cant_import_with_no_frame_of_the_program(lab: Lab, route: str) -> None:
    lab.rules(
        "expose-ro=./data",
        "expose-rw=./out",
        "python-import=atexit",
        "python-import=weakref",
        "python-import=threading",
        "python-import=concurrent",
        "python-import=importlib",
        "python-import=functools",
        "python-import=types",
        "python-import=json",
        "python-import=time",
        "python-import=_thread",
    )
    code = IMPORTS[route] + "\n"
    control = lab.control(code)
    assert "LOADED True" in control.stdout, control.stdout + control.stderr
    result = lab.run_sandboxed(code)
    assert "LOADED False" in result.stdout, result.stdout + result.stderr


def test_the_prompt_after_a_program_still_compiles_what_is_typed(lab: Lab) -> None:
    # -i: the interpreter's own prompt compiles with no frame and no source object.
    result = lab.sb("-i", "-c", "x = 41", stdin="print(x + 1)\n")
    assert "42" in result.stdout, result.stdout + result.stderr


# The program puts a pipe holding its own line of code on fd 0; the prompt that follows
# reads it, and a frameless compile with no source object passed for typed input.
FED_PROMPT = """
import os
r, w = os.pipe()
os.write(w, b"open('out/ran', 'w').write('x'); print('RAN', 6 * 7)\\n")
os.close(w)
os.dup2(r, 0)
"""


def test_cant_feed_the_prompt_a_line_of_code_through_a_replaced_stdin(lab: Lab) -> None:
    control = lab.py("-i", "-c", FED_PROMPT, stdin="")
    assert "RAN 42" in control.stdout, control.stdout + control.stderr
    lab.reset()
    result = lab.sb("-i", "-c", FED_PROMPT, stdin="")
    output = result.stdout + result.stderr
    assert "RAN" not in result.stdout, output
    assert "RuleApiPermissionError" in result.stderr, output
    assert "fd 0 is no longer the descriptor the sandbox started with" in result.stderr, output
    assert not (lab.out / "ran").exists()


def test_c_may_import_a_loaded_module_for_a_library(lab: Lab) -> None:
    # re.sub with a template imports re from C, for the standard library's _strptime.
    lab.rules("expose-ro=./data", "python-import=time")
    code = "import time\nprint('YEAR', time.strptime('2024', '%Y').tm_year)\n"
    assert got(lab.control(code), "YEAR 2024")
    result = lab.run_sandboxed(code)
    assert "YEAR 2024" in result.stdout, result.stdout + result.stderr


# Under -i the console's compiler (codeop) was trusted for the session: it compiled what
# any caller handed it, the program's code or a thread pool working for it.
CONSOLE = {
    "program": "import codeop\nexec(codeop.compile_command(\"print('RAN')\"))",
    "thread_pool": (
        "import codeop\nfrom concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor() as pool:\n"
        "    exec(pool.submit(codeop.compile_command, \"print('RAN')\").result())"
    ),
}


@pytest.mark.parametrize("route", list(CONSOLE))
def test_cant_compile_through_the_consoles_compiler(lab: Lab, route: str) -> None:
    code = CONSOLE[route]
    control = lab.py("-i", "-c", code, stdin="")
    assert "RAN" in control.stdout, control.stdout + control.stderr
    result = lab.sb("-i", "-c", code, stdin="")
    assert "RAN" not in result.stdout, result.stdout + result.stderr
    assert "RuleApiPermissionError" in result.stderr


def test_cant_run_a_program_module_before_the_program_starts(lab: Lab) -> None:
    # Before the program starts every import is the sandbox's own start, but a module of
    # the program's, named by PYTHONWARNINGS, would run the program's code in that time.
    def mine() -> None:
        (lab.project / "mine.py").write_text(
            "print('MINE RAN', flush=True)\nclass Warn(Warning): pass\n"
        )

    lab.setup(mine)
    warnings = "PYTHONWARNINGS=ignore::mine.Warn"
    path = f"PYTHONPATH={lab.project}"  # plain python reads its options before the cwd
    lab.rules("expose-ro=.", f"env={warnings}", f"env={path}", "python-import=sys")
    lab.env = dict(entry.split("=", 1) for entry in (warnings, path))
    code = "import sys\nprint('LOADED', 'mine' in sys.modules)\n"
    control = lab.control(code)
    assert "MINE RAN" in control.stdout, control.stdout + control.stderr
    lab.env = None  # python-sb itself must not read them: the rules give them to the sandbox
    result = lab.run_sandboxed(code)
    assert "MINE RAN" not in result.stdout, result.stdout + result.stderr
    assert "LOADED False" in result.stdout
