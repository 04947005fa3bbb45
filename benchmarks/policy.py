"""Cost of the policy engine: parsing a 500-line rule file, and one verdict per family.

Run with the installed package: ``python benchmarks/policy.py``. Prints one table; the
targets are those of the project brief (parse < 20 ms, each verdict < 5 µs).
"""

from __future__ import annotations

import os
import tempfile
import timeit
from pathlib import Path

from pysandboxes._policy.judge import ApiJudge, FileJudge, ImportJudge, NetJudge
from pysandboxes._policy.model import Access
from pysandboxes._policy.parser import parse_policy


def rule_file(root: Path, lines: int = 500) -> Path:
    """A realistic 500-line file: every family, comments, a few includes' worth of rules."""
    body: list[str] = ["# benchmark rules", "os-sandbox=landlock", "py-sandbox=true"]
    for i in range(60):
        (root / f"dir{i}" / "sub").mkdir(parents=True)
        body.append(f"expose-ro=./dir{i}")
        body.append(f"expose-rw=./dir{i}/sub  # writable part")
    body += [f"ignore=*.secret{i}" for i in range(20)]
    body += [f"env=VAR_{i}=${{HOST_{i}:-default}}" for i in range(60)]
    body += [f"net=ALLOW|tcp|10.{i}.0.0/16|443,8000-8100|OUT" for i in range(80)]
    body += [f"net=DENY|*|10.{i}.1.1|*|OUT" for i in range(20)]
    body += [f"python-import=mod{i}, pkg{i}" for i in range(100)]
    body += ["python-api=ALLOW:threads", "python-api=DENY:os.system"]
    while len(body) < lines:
        body.append("# a comment line explaining the rules above")
    path = root / ".py-sandboxes"
    path.write_text("\n".join(body[:lines]) + "\n")
    return path


def best(stmt: object, number: int, repeat: int = 5) -> float:
    """Best time of one call, in seconds."""
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number  # type: ignore[arg-type]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = rule_file(root)
        env = dict(os.environ)

        def parse() -> None:
            parse_policy(str(path), cwd=tmp, env=env, resolve_host=lambda h: [])

        policy = parse_policy(str(path), cwd=tmp, env=env)
        files = FileJudge(policy.expose, policy.ignore, policy.rule_files)
        net = NetJudge(policy.net)
        imports = ImportJudge(policy)
        api = ApiJudge(policy)
        deep = str(root / "dir42" / "sub" / "a" / "b" / "c" / "file.txt")

        def path_deep() -> object:
            return files.judge(deep, Access.READ)

        def path_hidden() -> object:
            return files.judge("/etc/passwd", Access.READ)

        def net_verdict() -> object:
            return net.judge("tcp", "10.79.3.4", 443, "OUT")

        rows = [
            ("parse a 500-line rule file", best(parse, 20), 20e-3),
            ("path verdict (7 levels deep)", best(path_deep, 20000), 5e-6),
            ("path verdict, not exposed", best(path_hidden, 20000), 5e-6),
            ("net verdict (100 rules)", best(net_verdict, 20000), 5e-6),
            ("import verdict", best(lambda: imports.judge("pkg77.sub"), 50000), 5e-6),
            ("api verdict", best(lambda: api.judge("os.system"), 50000), 5e-6),
        ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'time':>10}  {'target':>10}  {'ratio':>6}")
    for name, seconds, target in rows:
        print(f"{name:<{width}}  {_fmt(seconds):>10}  {_fmt(target):>10}  {seconds / target:>6.2f}")


def _fmt(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.2f} µs"


if __name__ == "__main__":
    main()
