#!/usr/bin/env python3
"""Writes the Swift library table of docs/architecture.md ("Modules") from Package.swift.

The "Depends on" column and the order of the rows come from `swift package dump-package`; the
"What it holds" column is written by hand in the table itself and kept. A library without a
description stops the script with a message saying where to write one. The BEGIN marker records
the SHA-256 of the Package.swift it was made from, so DocsTests fails when Package.swift changed
and scripts/gen-docs.sh was not run.
"""
import hashlib
import json
import re
import subprocess
import sys

DOC = "docs/architecture.md"
BEGIN = "<!-- BEGIN generated from Package.swift"
END = "<!-- END generated from Package.swift -->"


def target_name(dependency):
    # {"byName": ["X", null]} or {"target": ["X", null]}: no outside packages, so no products.
    for kind in ("byName", "target"):
        if kind in dependency:
            return dependency[kind][0]
    sys.exit(f"gen-module-table: a dependency of an unexpected kind: {dependency}")


def main():
    manifest = open("Package.swift", "rb").read()
    package = json.loads(subprocess.run(["swift", "package", "dump-package"], check=True,
                                        capture_output=True, text=True).stdout)
    libraries = [t for t in package["targets"]
                 if t["type"] == "regular" and t.get("path") is None and not re.match(r"C[A-Z]", t["name"])]
    text = open(DOC, encoding="utf-8").read()
    start, stop = text.find(BEGIN), text.find(END)
    if start < 0 or stop < start:
        sys.exit(f"gen-module-table: {DOC} lacks the markers '{BEGIN} ...' and '{END}'")
    described = {}
    for line in text[start:stop].splitlines():
        row = re.match(r"\| `([^`]+)` \| (.*) \| [^|]* \|$", line)
        if row:
            described[row.group(1)] = row.group(2)
    missing = [t["name"] for t in libraries if t["name"] not in described]
    if missing:
        sys.exit("gen-module-table: describe " + ", ".join(missing) + f" in {DOC}'s module table "
                 "(a row '| `NAME` | what it holds | - |'; the last column is generated)")
    lines = [f"{BEGIN}, sha256 {hashlib.sha256(manifest).hexdigest()} -->",
             f"**Swift libraries** ({len(libraries)}):", "",
             "| Library | What it holds | Depends on |", "|---|---|---|"]
    for target in libraries:
        dependencies = [target_name(d) for d in target["dependencies"]]
        column = ", ".join(f"`{d}`" for d in dependencies) or "—"
        lines.append(f"| `{target['name']}` | {described[target['name']]} | {column} |")
    text = text[:start] + "\n".join(lines) + "\n" + text[stop:]
    open(DOC, "w", encoding="utf-8").write(text)
    print(f"gen-module-table: wrote {len(libraries)} libraries into {DOC}")


if __name__ == "__main__":
    main()
