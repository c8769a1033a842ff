#!/usr/bin/env python3
"""Hostile run files for `zerotrain report`: every string the report reads becomes markup.

    report_hostile.py make CLEAN_RUN HOSTILE_RUN FIELDS.json
        Copy the run directory CLEAN_RUN to HOSTILE_RUN and replace every string of every
        file the report reads with markup that runs script if it reaches the page
        unescaped: JSON files (run.json, heartbeat.json, complete.json, watch.json,
        ranks/*.flight.json, ranks/*.alive, checkpoints/*/meta.json): every string value,
        nested ones too; JSONL files (metrics.jsonl, ranks/*.metrics.jsonl): a string field
        added to every object line (they hold numbers only); checkpoints/latest; a
        ranks/*.power.csv line whose power_w is "n/a" in the clean run (the report shows
        the parse error, which quotes it); the flight recorders (ranks/*.flight): every
        record's label and the host name. Each string starts with a marker ~N~;
        FIELDS.json maps the markers to "file:field".
    report_hostile.py compare CLEAN.html HOSTILE.html FIELDS.json --state S [--show FIELD ...]
        CLEAN.html and HOSTILE.html are the two pages (or Chromium's --dump-dom of them).
        The hostile page must hold exactly the elements of the clean one (the same number
        of each tag), only attributes the clean page has on that tag, no on* attribute,
        no element or attribute a payload makes (script, img, data-pwned, an id on body),
        class words and data-state values of the clean page (plus st-unknown / unknown),
        the badge's data-state S, every plot with the clean page's data-points; and each
        --show FIELD's marker in its text (the payload reached the page, as text).
Standard library only; the DOM parser is report_check.py's. Exit 0 when all hold, 1 with
every failure listed.
"""
import collections
import json
import os
import re
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_check import parse  # noqa: E402

PWN = "document.documentElement.dataset.pwned"
# One string for every context a value could land in: element text, a double- or
# single-quoted attribute, an unquoted one, <style>/<title>/<textarea> raw text. No
# comma, so that it is one field of a CSV line.
PAYLOAD = ('"><script>' + PWN + "='script'</script>"
           '<img src=x onerror="' + PWN + "='img'\">"
           "' onmouseover='" + PWN + "=1' x='"
           '</style></title></textarea><svg onload="' + PWN + "='svg'\">"
           '" onfocus="' + PWN + '=2" autofocus x="')
# Flight recorder labels and host names hold 47 bytes: short payloads, in turn.
SHORT = ["<svg onload=document.body.id=1>", '"><script>document.body.id=2</script>',
         "' onmouseover='document.body.id=3' '", "<img src=x onerror=document.body.id=4>"]


class Marks:
    def __init__(self):
        self.fields = {}

    def mark(self, where):
        m = f"~{len(self.fields) + 1}~"
        self.fields[m] = where
        return m


def hostile_json(value, marks, where):
    if isinstance(value, str):
        return marks.mark(where) + PAYLOAD
    if isinstance(value, list):
        return [hostile_json(v, marks, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: hostile_json(v, marks, f"{where}.{k}" if ":" in where else f"{where}:{k}") for k, v in value.items()}
    return value


def make(clean, out, fields_path):
    if os.path.exists(out):
        shutil.rmtree(out)
    shutil.copytree(clean, out)
    marks = Marks()
    for dirpath, _, files in os.walk(out):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, out)
            if name in ("run.json", "heartbeat.json", "complete.json", "watch.json", "meta.json") or \
                    name.endswith(".flight.json") or name.endswith(".alive"):
                with open(path, encoding="utf-8") as f:
                    doc = json.load(f)
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(hostile_json(doc, marks, rel), f, indent=1)
            elif name.endswith(".jsonl"):
                lines = open(path, "rb").read().split(b"\n")
                mark = marks.mark(rel + ":note")
                for i, line in enumerate(lines):
                    try:
                        doc = json.loads(line)
                    except ValueError:
                        continue  # an incomplete last line stays as it is
                    if isinstance(doc, dict):
                        doc["note"] = mark + PAYLOAD
                        lines[i] = json.dumps(doc).encode()
                open(path, "wb").write(b"\n".join(lines))
            elif name == "latest":
                open(path, "w").write(marks.mark(rel) + PAYLOAD + "\n")
            elif name.endswith(".power.csv"):
                text = open(path).read()
                if ",n/a," in text:
                    open(path, "w").write(text.replace(",n/a,", "," + marks.mark(rel) + PAYLOAD + ",", 1))
            elif name.endswith(".flight"):
                data = bytearray(open(path, "rb").read())
                if data[:8] != b"ZTFLIGHT":
                    continue
                mark = marks.mark(rel + ":label")
                data[80:128] = fixed48(marks.mark(rel + ":host") + SHORT[0])
                (capacity,) = struct.unpack_from("<I", data, 20)
                for slot in range(capacity):
                    rec = 128 + 128 * slot
                    (seq,) = struct.unpack_from("<Q", data, rec + 8)
                    if seq:
                        data[rec + 80:rec + 128] = fixed48(mark + SHORT[seq % len(SHORT)])
                open(path, "wb").write(bytes(data))
    with open(fields_path, "w") as f:
        json.dump(marks.fields, f, indent=1)
    print(f"{len(marks.fields)} hostile strings in {out}")
    return 0


def fixed48(s):
    b = s.encode()[:47]
    return b + b"\0" * (48 - len(b))


# ---- compare -------------------------------------------------------------------------
def inventory(path):
    root = parse(path)
    nodes = [n for n in root.iter() if n.tag != "#root"]
    return root, nodes


def compare(clean_path, hostile_path, fields_path, state, show):
    errors = []
    fields = json.load(open(fields_path))
    croot, clean = inventory(clean_path)
    hroot, hostile = inventory(hostile_path)
    ctags, htags = collections.Counter(n.tag for n in clean), collections.Counter(n.tag for n in hostile)
    for tag in sorted(set(ctags) | set(htags)):
        if ctags[tag] != htags[tag]:
            errors.append(f"<{tag}>: {htags[tag]} in the hostile page, {ctags[tag]} in the clean one")
    cattrs = {(n.tag, a) for n in clean for a in n.attrs}
    for n in hostile:
        for a, v in n.attrs.items():
            if a.startswith("on"):
                errors.append(f"<{n.tag} {a}={v!r}>: an event handler attribute")
            elif (n.tag, a) not in cattrs:
                errors.append(f"<{n.tag} {a}={v!r}>: an attribute the clean page does not have on <{n.tag}>")
    for n in hostile:
        if n.tag in ("script", "img", "iframe", "object", "embed", "link", "textarea", "input"):
            errors.append(f"<{n.tag}> element: the report makes none")
    cclass = {w for n in clean for w in n.cls()} | {"st-unknown"}
    hclass = {w for n in hostile for w in n.cls()}
    if hclass - cclass:
        errors.append(f"class words the clean page does not have: {sorted(hclass - cclass)[:8]}")
    cstate = {n.attrs["data-state"] for n in clean if "data-state" in n.attrs} | {"unknown"}
    hstate = {n.attrs["data-state"] for n in hostile if "data-state" in n.attrs}
    if hstate - cstate:
        errors.append(f"data-state values outside the fixed set: {sorted(hstate - cstate)[:8]}")
    badge = [n for n in hostile if n.attrs.get("id") == "state"]
    if len(badge) != 1 or badge[0].attrs.get("data-state") != state or f"st-{state}" not in badge[0].cls():
        errors.append(f"the state badge: {[b.attrs for b in badge]}, expected data-state {state!r}, class st-{state}")
    # the page still stands: every plot of the clean page, with its points
    plots = lambda nodes: {n.attrs.get("id"): n.attrs for n in nodes if n.tag == "svg" and "plot" in n.cls()}
    cplots, hplots = plots(clean), plots(hostile)
    if sorted(cplots) != sorted(hplots):
        errors.append(f"plots: {sorted(hplots)} in the hostile page, {sorted(cplots)} in the clean one")
    for pid, a in cplots.items():
        h = hplots.get(pid, {})
        for k in ("data-points", "data-empty"):
            if a.get(k) != h.get(k):
                errors.append(f"plot {pid}: {k} {h.get(k)!r}, the clean page's {a.get(k)!r}")
    # the payloads are on the page as text
    text = hroot.all_text()
    for want in show:
        marks = [m for m, where in fields.items() if where == want or re.fullmatch(want, where)]
        if not marks:
            errors.append(f"--show {want}: no such hostile field (have e.g. {sorted(set(fields.values()))[:6]})")
        elif not any(m in text for m in marks):
            errors.append(f"{want} ({', '.join(marks[:3])}): its text is not on the page")
    for e in errors[:40]:
        print("FAIL: " + e)
    if errors:
        return 1
    print(f"ok: {hostile_path}: {len(hostile)} elements as in the clean page, {len(cattrs)} (tag, attribute) pairs, "
          f"no handler, {len(hplots)} plots, {len(show)} hostile fields shown as text")
    return 0


def main(argv):
    if len(argv) >= 5 and argv[1] == "make":
        return make(argv[2], argv[3], argv[4])
    if len(argv) >= 5 and argv[1] == "compare":
        state, show, rest = None, [], argv[5:]
        while rest:
            flag, val, rest = rest[0], rest[1], rest[2:]
            if flag == "--state":
                state = val
            elif flag == "--show":
                show.append(val)
            else:
                print(__doc__)
                return 2
        return compare(argv[2], argv[3], argv[4], state, show)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
