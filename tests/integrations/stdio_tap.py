"""Runs a stdio server and keeps a copy of every byte it writes on standard output.

Usage: python stdio_tap.py COPY_FILE COMMAND [ARG...]. Standard input and error pass
through; standard output is copied to COPY_FILE as it is relayed, so a test can check
that nothing but the protocol ever reached it.
"""

import os
import subprocess
import sys


def main() -> int:
    copy_path, command = sys.argv[1], sys.argv[2:]
    with open(copy_path, "wb") as copy:
        server = subprocess.Popen(command, stdout=subprocess.PIPE)
        assert server.stdout is not None
        while chunk := os.read(server.stdout.fileno(), 65536):
            copy.write(chunk)
            copy.flush()
            os.write(1, chunk)
        return server.wait()


if __name__ == "__main__":
    sys.exit(main())
