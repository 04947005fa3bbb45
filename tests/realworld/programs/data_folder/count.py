"""Reads every file of its data folder (25,000 of them) and adds them up."""

import os

total = 0
for i in range(25000):
    with open(os.path.join("d", f"f{i}.txt")) as handle:
        total += int(handle.read())
print("files", 25000, "total", total)
