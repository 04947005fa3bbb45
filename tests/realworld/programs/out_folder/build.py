"""A build step: makes out/ (again, in a clean checkout), writes files there, reads them."""

import json
import os
import shutil
import zipfile

os.makedirs("out", exist_ok=True)
os.makedirs("out/pages", exist_ok=True)
for n in range(3):
    with open(f"out/pages/page{n}.txt", "w") as page:
        page.write(f"page {n}\n")
with open("out/index.json", "w") as index:
    json.dump(sorted(os.listdir("out/pages")), index)
with open("out/index.json") as index, zipfile.ZipFile("out/site.zip", "w") as archive:
    for name in json.load(index):
        archive.write(f"out/pages/{name}", name)
shutil.rmtree("out/pages")
with zipfile.ZipFile("out/site.zip") as archive:
    print(archive.namelist(), archive.read("page2.txt").decode().strip())
print(sorted(os.listdir("out")))
