"""A multiprocessing pool, started with the start method the command line names."""

import multiprocessing
import sys


def square(n: int) -> int:
    return n * n


if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    pool = context.Pool(2)
    print(sys.argv[1], pool.map(square, range(6)))
    pool.close()  # the workers end on their own: no signal is needed (terminate() sends one)
    pool.join()
    lock = context.Lock()
    with lock:
        print("locked")
