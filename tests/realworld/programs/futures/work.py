"""A process pool of concurrent.futures, then a subprocess run by asyncio."""

import asyncio
import concurrent.futures
import sys


def cube(n: int) -> int:
    return n**3


async def child() -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "print(6 * 7)", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    return out.decode().strip()


if __name__ == "__main__":
    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as pool:
        print("cubes", list(pool.map(cube, range(5))))
    print("child", asyncio.run(child()))
