#!/usr/bin/env python3
"""Prints the `swift test --filter`/`--skip` regular expression that selects the suites tagged
`.slow`, `.nats` or `.root` (Tests/TestTraits) in the given test targets.

`swift test` on Linux filters by name only, not by tag; the tags stay the source of truth and
this script turns them into names: it reads each `@Suite(...)` attribute whose arguments name
one of the tags and takes the type declared after it.

    scripts/test-sets.py [--targets A,B] [--tags slow,nats,root]
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUITE = re.compile(r"@Suite\((?P<args>[^)]*(?:\([^)]*\)[^)]*)*)\)\s*(?:(?:final\s+)?(?:struct|class|enum|actor))\s+(?P<name>\w+)", re.S)


def tagged_suites(targets, tags):
    found = []
    for target in targets:
        for path in sorted((ROOT / "Tests" / target).rglob("*.swift")):
            text = path.read_text(encoding="utf-8")
            for match in SUITE.finditer(text):
                arguments = match.group("args")
                tag_lists = re.findall(r"\.tags\(([^)]*)\)", arguments)
                named = {t.strip().lstrip(".") for group in tag_lists for t in group.split(",")}
                if named & tags:
                    found.append(f"{target}.{match.group('name')}")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--targets", default="")
    parser.add_argument("--tags", default="slow,nats,root")
    parser.add_argument("--list", action="store_true", help="one suite a line instead of a regex")
    options = parser.parse_args()
    targets = [t for t in options.targets.split(",") if t] or sorted(
        p.name for p in (ROOT / "Tests").iterdir() if p.is_dir() and p.name.endswith("Tests"))
    suites = tagged_suites(targets, set(options.tags.split(",")))
    if not suites:
        print("test-sets.py: no suite carries the tags " + options.tags, file=sys.stderr)
        return 1
    if options.list:
        print("\n".join(suites))
    else:
        # Anchored on the suite's full name: `PushJournalTests.CrashTests` must not also pick
        # `PushJournalTests.CrashTestsHelpers`.
        print("|".join(re.escape(s) + r"(/|$)" for s in suites))
    return 0


if __name__ == "__main__":
    sys.exit(main())
