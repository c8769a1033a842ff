#!/usr/bin/env python3
"""Every zt_expect_test (tests/support/expect.cmake) fails when its program prints what it always
prints and then exits otherwise: once with another exit code (1, or 0 where 1 is expected) and once
killed by SIGSEGV, both after the program's own output and exit handlers (exit_preload.c,
LD_PRELOAD'ed through expect.cmake's ZT_EXPECT_PRELOAD). Each test must pass unmutated and fail
under both mutations. Tests run as ctest would run them (command, ENVIRONMENT, WORKING_DIRECTORY),
after their fixtures' setup tests and the tests they DEPEND on, but not through ctest itself, so
this can run inside a ctest run.
    mutate_exit.py BUILD_DIR PRELOAD_LIB [TEST_REGEX]
Exits 1 naming every test that passed a mutation."""
import json, os, re, subprocess, sys

build, lib = sys.argv[1], os.path.abspath(sys.argv[2])  # tests run in their own directories
if not os.path.isfile(lib):
    sys.exit(f"FAIL: {lib}: no such preload library (build the zt_exit_preload target)")
pick = re.compile(sys.argv[3] if len(sys.argv) > 3 else ".")
tests = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True,
                                  capture_output=True, text=True).stdout)["tests"]
by_name = {t["name"]: t for t in tests}


def props(t):
    return {p["name"]: p["value"] for p in t.get("properties", [])}


def run(t, extra=None):
    p = props(t)
    env = dict(os.environ)
    for kv in p.get("ENVIRONMENT", []):
        k, v = kv.split("=", 1)
        env[k] = v
    env.update(extra or {})
    r = subprocess.run(t["command"], cwd=p.get("WORKING_DIRECTORY", build), env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=p.get("TIMEOUT", 600))
    return r.returncode


def prepare(t):
    """The fixtures' setup tests and the tests t depends on, unmutated."""
    p = props(t)
    for fx in p.get("FIXTURES_REQUIRED", []):
        for s in tests:
            if fx in props(s).get("FIXTURES_SETUP", []):
                run(s)
    for d in p.get("DEPENDS", []):
        if d in by_name and not props(by_name[d]).get("FIXTURES_SETUP"):  # setups ran first
            prepare(by_name[d])
            run(by_name[d])


n, bad = 0, []
for t in tests:
    cmd = t.get("command", [])
    if not pick.search(t["name"]) or not any(a.endswith("support/expect.cmake") for a in cmd):
        continue
    n += 1
    want = next(a.split("=", 1)[1] for a in cmd if a.startswith("-DZT_EXPECT_EXIT="))
    other = "0" if want == "1" else "1"
    prepare(t)
    if run(t) != 0:
        bad.append(f"{t['name']}: fails unmutated")
        continue
    caught = []
    for mode in (other, "segv"):
        prepare(t)
        if run(t, {"ZT_EXPECT_PRELOAD": lib, "ZT_EXIT_PRELOAD_AS": mode}) == 0:
            bad.append(f"{t['name']}: passes when its program exits with '{mode}' after printing")
        else:
            caught.append(mode)
    print(f"{t['name']:46s} expects exit {want}: fails on exit {other}: {other in caught}, on SIGSEGV: {'segv' in caught}")
if n == 0:
    sys.exit(f"FAIL: no zt_expect_test matches /{pick.pattern}/")
for b in bad:
    print("FAIL:", b)
print(f"{n} tests, {n - len({b.split(':')[0] for b in bad})} failing on both mutations")
sys.exit(1 if bad else 0)
