"""A FastAPI application served by uvicorn on 127.0.0.1, asked once by httpx, then stopped."""

import sys
import threading
import time

import httpx
import uvicorn
from fastapi import FastAPI

app = FastAPI()


@app.get("/add")
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


port = int(sys.argv[1])
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
thread = threading.Thread(target=server.run)
thread.start()
while not server.started:
    time.sleep(0.05)
answer = httpx.get(f"http://127.0.0.1:{port}/add", params={"a": 2, "b": 3}, timeout=10)
print(answer.status_code, answer.text)
server.should_exit = True
thread.join()
