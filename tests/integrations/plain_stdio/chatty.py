"""The plain server's sandboxed functions: each writes to standard output, at the
Python level and on descriptor 1, and to standard error."""

import os
import sys

from pysandboxes import sandbox


@sandbox
async def shout(text: str) -> str:
    print("shouting", text)
    os.write(1, b"raw bytes on descriptor 1\n")
    print("a word on stderr", file=sys.stderr)
    return text.upper()


@sandbox
def whisper(text: str) -> str:
    print("whispering", text, end="")  # no newline, no flush: left in a buffer
    sys.stdout.write("and more")
    return text.lower()
