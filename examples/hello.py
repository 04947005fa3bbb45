"""A tiny program for the README's first command.

Once complete mode lands, `python-sb examples/hello.py` runs it under
`examples/.py-sandboxes`: the read of `examples/data/greeting.txt` is allowed, the read of
the user's ~/.ssh directory is refused.
"""

from pathlib import Path

here = Path(__file__).parent
print((here / "data" / "greeting.txt").read_text().strip())
try:
    print(sorted(p.name for p in (Path.home() / ".ssh").iterdir()))
except OSError as exc:
    print(f"refused as expected: {exc}")
