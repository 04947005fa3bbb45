"""A FastAPI application served by uvicorn on 127.0.0.1, asked once, then stopped."""

import sys
import threading
import time
import urllib.request

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
with urllib.request.urlopen(f"http://127.0.0.1:{port}/add?a=2&b=3") as answer:
    print(answer.status, answer.read().decode())
server.should_exit = True
thread.join()
