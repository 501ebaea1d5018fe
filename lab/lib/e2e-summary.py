#!/usr/bin/env python3
"""summary.md of an e2e run from ginkgo's junit.xml: counts, then a row per test that ran (result, seconds,
the first line of a failure's message). Usage: e2e-summary.py JUNIT WALL_SECONDS"""
import sys
import xml.etree.ElementTree as ET

junit, wall = sys.argv[1], float(sys.argv[2])
rows, counts, seen = [], {"passed": 0, "failed": 0, "skipped": 0}, set()
for case in ET.parse(junit).getroot().iter("testcase"):
    name = case.get("name", "")
    # Suite-level nodes are not tests; ginkgo's report can list a test twice.
    if name.startswith(("[SynchronizedBeforeSuite]", "[SynchronizedAfterSuite]", "[ReportBeforeSuite]", "[ReportAfterSuite]")):
        continue
    if name in seen:
        continue
    seen.add(name)
    failure = case.find("failure")
    if failure is None:
        failure = case.find("error")
    if case.find("skipped") is not None:
        counts["skipped"] += 1
        continue
    result = "failed" if failure is not None else "passed"
    counts[result] += 1
    why = ""
    if failure is not None:
        why = (failure.get("message") or failure.text or "").strip().splitlines()
        why = why[0][:160].replace("|", "\\|") if why else ""
    name = name.removeprefix("[It] ").replace("|", "\\|")
    rows.append(f"| {name} | {result} | {float(case.get('time', 0)):.0f} | {why} |")
print(f"{counts['passed']} passed, {counts['failed']} failed ({counts['skipped']} not selected); wall time {wall:.0f} s\n")
print("| test | result | s | why (failures) |")
print("|---|---|---|---|")
print("\n".join(sorted(rows)))
