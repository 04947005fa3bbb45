"""A multiprocessing pool, started with the start method the command line names."""

import multiprocessing
import sys


def square(n: int) -> int:
    return n * n


if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    with context.Pool(2) as pool:
        print(sys.argv[1], pool.map(square, range(6)))
    lock = context.Lock()
    with lock:
        print("locked")
