"""MkDocs hooks: the docs' code fences carry tags for the test suite (```python partial,
```python file=tools.py, ```py-sandboxes valid), which Python-Markdown's fences do not
understand (the block would render as raw text, its `#` comment lines as headings).
The site shows each as a plain fence of its language, as GitHub does."""

from __future__ import annotations

import re

_TAGGED_FENCE = re.compile(r"^(\s*```+)([\w+-]+)[ \t]+\S[^\n]*$", re.M)


def on_page_markdown(markdown: str, **_: object) -> str:
    return _TAGGED_FENCE.sub(r"\1\2", markdown)
