"""Writes a rotating log, a shelf, and a zip and a tar archive of its report."""

import logging
import logging.handlers
import shelve
import tarfile
import zipfile

handler = logging.handlers.RotatingFileHandler("app.log", maxBytes=300, backupCount=2)
logging.basicConfig(level=logging.INFO, handlers=[handler])
log = logging.getLogger("app")
for i in range(30):
    log.info("step %d of the nightly job", i)
with shelve.open("cache") as shelf:
    shelf["runs"] = shelf.get("runs", 0) + 1
    print("runs", shelf["runs"])
with open("report.txt", "w") as report:
    report.write("all good\n")
with zipfile.ZipFile("out.zip", "w") as archive:
    archive.write("report.txt")
with tarfile.open("out.tar.gz", "w:gz") as archive:
    archive.add("report.txt")
with zipfile.ZipFile("out.zip") as archive:
    print(archive.namelist(), archive.read("report.txt").decode().strip())
