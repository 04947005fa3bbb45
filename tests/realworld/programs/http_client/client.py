"""Asks a local server with requests, then with httpx."""

import sys

import httpx
import requests

url = f"http://127.0.0.1:{sys.argv[1]}/status"
print("requests", requests.get(url, timeout=10).json())
print("httpx", httpx.get(url, timeout=10).json())
