"""Partial mode: the application holds a token; its tools run in a sandbox without it.

The rules (examples/partial/.py-sandboxes) expose examples/data read-only and nothing
else: the greeting is read, the token is not there, and listing ~/.ssh is refused.
"""

import os

import tools

from pysandboxes import SandBoxError, sandboxes

os.environ["DEMO_API_TOKEN"] = "tok-123"  # the application's own secret
with sandboxes():
    print("allowed:", tools.greeting())
    print("the token, seen by the tool:", tools.steal_token())
    try:
        tools.list_ssh_keys()
    except SandBoxError as exc:
        print("refused:", exc)
