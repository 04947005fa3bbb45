"""The README's first command runs this under examples/.py-sandboxes.

The rules expose examples/data read-only, and nothing else: the greeting is read, the
attempt to list the user's ~/.ssh is refused, and the program is told why.
"""

from pathlib import Path

here = Path(__file__).parent
print("allowed:", (here / "data" / "greeting.txt").read_text().strip())
try:
    print(sorted(p.name for p in (Path.home() / ".ssh").iterdir()))
except OSError as exc:
    print("refused:", exc)
