"""fetch_url, a tool of server.py: it runs in the sandboxed child of the "web" profile,
under the rules of .py-sandboxes (the hosts it may reach, nothing else)."""

import urllib.request

from pysandboxes import sandbox


@sandbox(profile="web", timeout=10)
def fetch_url(url: str) -> str:
    """Fetch a web page and return its text (the first 100 kB).

    Only the hosts the server's rules name are reachable."""
    print("fetching", url)  # on the server's standard error, never in the protocol
    with urllib.request.urlopen(url, timeout=8) as response:
        return response.read(100_000).decode("utf-8", "replace")
