"""The rule file written by a first learning run, before the learned rules go into it.

Almost all of it is comments: a reader who opens the file for the first time learns each
family of rules where its rules live. The active lines are the layers and the imports of
the standard library's pure modules (``SAFE_MODULES``): with nothing learned the file
denies every file, variable, connection and sensitive call. Learned rules are inserted
before the closing ``# </learning_...>`` marker of their block (see ``writer``), so the
markers must stay in ``writer.BLOCKS`` order.
"""

from __future__ import annotations

#: The modules of the standard library granted by the template: pure code over data, or C
#: accelerators of it, whose import opens nothing, starts nothing and loads no library of
#: the program's choosing (``python-sb``'s session without a rule file runs under them).
SAFE_MODULES = (
    "abc", "base64", "bisect", "calendar", "cmath", "collections", "contextlib", "copy",
    "csv", "dataclasses", "datetime", "decimal", "difflib", "enum", "fractions", "functools",
    "graphlib", "hashlib", "heapq", "hmac", "html", "itertools", "json", "keyword", "math",
    "numbers", "operator", "pathlib", "pprint", "random", "re", "reprlib", "secrets",
    "statistics", "string", "struct", "textwrap", "time", "types", "typing", "unicodedata",
    "weakref",
)  # fmt: skip


def _import_lines(names: tuple[str, ...], width: int = 88) -> str:
    """``python-import=`` lines granting ``names``, each at most ``width`` long."""
    lines: list[str] = []
    line = ""
    for name in names:
        if line and len(line) + len(name) + 2 > width:
            lines.append(line)
            line = ""
        line = f"{line}, {name}" if line else f"python-import={name}"
    return "\n".join([*lines, line])


TEMPLATE = """\
# .py-sandboxes: the rights this program runs with, one rule per line.
#
# DENY BY DEFAULT. Anything no rule allows is refused: files, environment variables,
# network, imports and sensitive calls. A learning run (python-sb --learn, or a first run
# without this file) records what the program really did and writes the missing rules in
# the learning blocks below, each with the place it came from. Review them before you keep
# them: every rule is a right you grant.
#
# Syntax: key=value (no spaces around '='); '#' starts a comment unless it is quoted.
# ${VAR} and ${VAR:-default} take a value from the environment python-sb was started in.
# Relative paths are relative to the directory of the file that holds the line.
# An unknown key is an error, so a typo can neither widen nor narrow the rules unnoticed.

# == COMPOSITION ==========================================================================
# include "PATH" reads another rule file at this place; include-platform=linux "PATH" does
# so only on that platform (the value of sys.platform).
# Shared profiles are off by default: an include grants rights that are not reviewed in
# this file. Uncomment the ones you want.
#include "~/.config/py-sandboxes/user.py-sandboxes"
#include "/etc/py-sandboxes/global.py-sandboxes"
# Local additions kept out of version control, read from this file's directory:
#include "./.local.py-sandboxes"

# == ENVIRONMENT ==========================================================================
# The sandbox receives only the variables named here; for it, the others do not exist.
#   env=NAME=value           a fixed value
#   env=NAME=${NAME}         the value from the launching environment
#   env=PREFIX_*=${PREFIX_*} every variable whose name matches ('*' is the only wildcard)
#   unenv=NAME               never give NAME (or a '*' pattern), whatever env= says
# An exact name wins over a pattern; unenv= wins over everything.
#env=LANG=${LANG:-C.UTF-8}
#env=TMPDIR=${TMPDIR:-/tmp}
#unenv=*_TOKEN
# <learning_guard_envs>
# </learning_guard_envs>

# == FILES ================================================================================
#   expose-ro=PATH   read a file, or a directory and everything below it
#   expose-rw=PATH   the same, with writing, creating and deleting
#   ignore=PATTERN   hide what matches, even inside an exposure; '*', '?', '[...]' and '**'
#                    work as in .gitignore, and a pattern with a '/' is anchored here
# The most specific exposure wins, and ignore= wins over every exposure.
# Learning grants the file that was used, not its directory: widen a rule yourself when
# the program really needs the whole directory.
# Secrets next to your code are easy to leak; hide them even under a broad exposure:
#expose-ro=.
#expose-rw=./data
#ignore=.env
#ignore=**/*.pem
# <learning_guard_files>
# </learning_guard_files>

# == NETWORK ==============================================================================
# net=ACTION|PROTO|NETWORK|PORTS|DIRECTION
#   ACTION     ALLOW or DENY; a matching DENY wins over any ALLOW
#   PROTO      tcp, udp, tcp,udp or *
#   NETWORK    an address, a CIDR network, a host name (resolved once, at start) or *
#   PORTS      443, 8000-8100, 80,443 or *
#   DIRECTION  OUT (connect, send), IN (bind, listen), or IN,OUT
#net=ALLOW|tcp|*|443|OUT
#net=ALLOW|tcp|127.0.0.1|${PORT:-8000}|IN
# A tool that fetches URLs chosen by a model should not reach your own network (SSRF):
#net=DENY|*|10.0.0.0/8|*|OUT
#net=DENY|*|172.16.0.0/12|*|OUT
#net=DENY|*|192.168.0.0/16|*|OUT
#net=DENY|*|169.254.0.0/16|*|OUT
#net=DENY|*|127.0.0.0/8|*|OUT
#net=DENY|*|fc00::/7|*|OUT
# <learning_guard_socket>
# </learning_guard_socket>

# == IMPORTS ==============================================================================
# python-import=NAME, NAME  top-level modules the program may import; their submodules
# follow. '*' allows every module. The line below grants the modules of the standard
# library that reach nothing by themselves: data, text, numbers, dates, containers. What
# they do to files (pathlib) is judged by the file rules all the same. The modules that
# reach files, the network, processes or C code (os, io, shutil, socket, urllib,
# subprocess, ctypes...) need a rule of their own:
python-import={SAFE}
#python-import=os, urllib
# <learning_guard_import>
# </learning_guard_import>

# == SENSITIVE CALLS ======================================================================
# python-api=ALLOW:TARGET, TARGET  or  python-api=DENY:TARGET, TARGET
# A target is a category, one function (os.system) or *. Importing a module does not
# grant its dangerous functions: each one is refused until a rule allows it.
#   process-exec     start programs: os.system, subprocess, os.exec*, fork, pty
#   process-control  signals to other processes, process groups, priorities, limits
#   privileges       change user or group, enter namespaces, umask
#   threads          start threads, set thread hooks
#   native           load and call C code: ctypes
#   introspection    reach into the interpreter: gc walks, trace and audit hooks, reload
#   dynamic-code     eval, exec and compile without checks (prefer the eval-* rules)
#   deserialization  pickle loads, which run code chosen by the data
# A function rule wins over a category rule, which wins over *; at equal rank DENY wins.
# One call may pass several guarded functions (subprocess.run reaches fork_exec): allow
# the category rather than the outer name.
#python-api=ALLOW:threads
#python-api=ALLOW:process-exec
#python-api=DENY:os.system
# <learning_guard_api>
# </learning_guard_api>

# == EVALUATED CODE =======================================================================
# With eval-* rules, eval(), exec() and compile() in your code accept a checked
# sub-language: the source is refused unless each construct is allowed, then runs under
# budgets. Without them (and without python-api=ALLOW:dynamic-code) they are refused.
#   eval-syntax=GROUP, NODE   arith, compare, conditional, loop, comprehension... or ast nodes
#   eval-call=NAME, NAME      the builtins the source may call
#   eval-attribute=NAME       attribute names it may read (str-methods, list-methods...)
#   eval-import=MODULE        modules an evaluated import may name
#   eval-magic=__NAME__       dunder names it may use
#   eval-timeout=, eval-max-iterations=, eval-max-alloc=, ...  its budgets
# A calculator for expressions written by a model:
#eval-syntax=arith, compare
#eval-call=abs, min, max, round
#eval-timeout=500ms
# <learning_guard_eval>
# </learning_guard_eval>

# == RESULTS OF SANDBOXED FUNCTIONS (partial mode) ========================================
#   remote-result-mode=values   the default: results come back as plain values only
#                               (numbers, strings, bytes, containers, dates, paths...)
#   remote-result-mode=objects  also rebuilds instances of the application's own classes and
#                               of classes the rules name; every other class stays refused
#   remote-result-class=pkg.module.Class   such a class (objects mode only)
# <learning_remote_result>
# </learning_remote_result>
# The sandboxed process of partial mode: a call's default timeout, and what the calls may
# use (each a failed call when reached, not a failed application):
#sandbox-timeout=30s
#sandbox-memory=512MiB
#sandbox-open-files=256
#sandbox-processes=64

# == PYTHON LAYER =========================================================================
# The precise layer: files, network, imports, calls and eval, with readable refusals.
# py-sandbox=false turns it off; the environment filter and the kernel layer remain.
py-sandbox=true

# == KERNEL LAYER =========================================================================
# The wall under the Python layer.
#   landlock    kernel path rules and TCP port rules; needs no binary, no root
#   unshare     namespaces: its own network, mounts and process ids
#   bwrap       bubblewrap, installed from your distribution
#   subprocess  a separate process, guarded by the Python layer only
#   none        no kernel layer
# A provider that cannot run on this host stops the start and says why: it never falls
# back to a weaker one. OS_SANDBOX=bwrap in the environment picks another kernel provider for
# one run (never subprocess or none: nothing in the environment weakens the rules).
os-sandbox=${OS_SANDBOX:-landlock}
# Provider options take the provider's name as a prefix:
#bwrap.hostname=sandbox

# == PERMISSION PROMPTS ===================================================================
# Uncomment to be asked on the terminal about each refusal of the Python layer (once, for
# this run, always: written here, or deny); the same as python-sb --prompt. A run with no
# terminal refuses as without it.
#prompt=tty

# == LEARNING LOCK ========================================================================
# Uncomment to keep these rules as reviewed: learning runs and rules added on the command
# line are then refused.
# learn=false
""".replace("python-import={SAFE}", _import_lines(SAFE_MODULES))


def active_lines(text: str = "") -> tuple[str, ...]:
    """The rules of ``text`` (the template by default), without comments or blank lines."""
    lines = (line.strip() for line in (text or TEMPLATE).splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


#: Where a new rule file starts, by the kind of learning run (see ``Plan.start``).
STARTS = {"template": TEMPLATE, "rules": ""}
