#!/usr/bin/env python3
"""Checks a zerotrain report / triage --html page as a real browser rendered it.

    report_check.py PAGE.html DOM.html SHOT.png [--expect ID=N ...] [--expect-series ID/NAME=N ...]
                    [--state-strip STATE=MIN_SNAPSHOTS ...]

DOM.html is `chromium --dump-dom` of the page, SHOT.png its `--screenshot` at the size the
page states (<body data-width data-height>). Standard library only (html.parser, zlib,
struct). Checks, for every <svg class="plot">:
  - the DOM after rendering holds it, with its axes (x and y axis lines, tick labels on
    both, both axis titles) unless it is an empty placeholder (data-empty);
  - each series' polylines hold data-points points in all, and its circles (if any)
    number data-points; the series add up to the plot's data-points; a legend entry per
    named series when there are several;
  - --expect ID=N: the plot's data-points is N (N counted by the caller from the run's
    files); --expect-series ID/NAME=N likewise for one series;
  - the screenshot: the right size, not blank, and inside the plot's area (its position
    on the page + data-area) there are pixels of every series' colour;
  - --state-strip STATE=K: the power picture's strip has a STATE stretch of >= K
    snapshots, and the screenshot shows the STATE colour at that rect.
Exit 0 when all hold, 1 with every failure listed.
"""
import html.parser
import re
import struct
import sys
import zlib


# ---- PNG ------------------------------------------------------------------------------
def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, w = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError(f"{path}: PNG depth {depth} colour type {ctype} interlace {interlace} not handled")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        ft = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        if ft == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif ft == 2:
            for x in range(stride):
                line[x] = (line[x] + prev[x]) & 255
        elif ft == 3:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + ((a + prev[x]) >> 1)) & 255
        elif ft == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b = prev[x]
                c = prev[x - bpp] if x >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[x] = (line[x] + pr) & 255
        elif ft != 0:
            raise ValueError(f"{path}: bad PNG filter {ft}")
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def pixel(img, x, y):
    w, h, bpp, rows = img
    o = x * bpp
    return tuple(rows[y][o:o + 3])


def hex_rgb(c):
    c = c.lstrip("#")
    return tuple(int(c[i:i + 2], 16) for i in (0, 2, 4))


def count_colour(img, x0, y0, x1, y1, rgb, tol=28, need=1 << 30):
    """Pixels within tol of rgb in the box (stops once `need` are found)."""
    w, h, bpp, rows = img
    n = 0
    for y in range(max(0, y0), min(h, y1)):
        row = rows[y]
        for x in range(max(0, x0), min(w, x1)):
            o = x * bpp
            if abs(row[o] - rgb[0]) <= tol and abs(row[o + 1] - rgb[1]) <= tol and abs(row[o + 2] - rgb[2]) <= tol:
                n += 1
                if n >= need:
                    return n
    return n


# ---- DOM ------------------------------------------------------------------------------
class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children, self.text = tag, dict(attrs), parent, [], ""

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def cls(self):
        return (self.attrs.get("class") or "").split()

    def all_text(self):
        return self.text + "".join(c.all_text() for c in self.children)


VOID = {"meta", "br", "link", "img", "input", "hr", "area", "base", "col", "source", "wbr"}


class TreeBuilder(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", [], None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.text += data


def parse(path):
    t = TreeBuilder()
    t.feed(open(path, encoding="utf-8").read())
    return t.root


def polyline_points(node):
    pts = (node.attrs.get("points") or "").split()
    return len(pts)


def main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 2
    page, dom_path, shot = argv[1:4]
    expect, expect_series, strips = {}, {}, {}
    args = argv[4:]
    while args:
        flag, val = args[0], args[1]
        args = args[2:]
        k, v = val.rsplit("=", 1)
        {"--expect": expect, "--expect-series": expect_series, "--state-strip": strips}[flag][k] = int(v)
    errors = []
    dom = parse(dom_path)
    body = next((n for n in dom.iter() if n.tag == "body"), None)
    if body is None:
        return print("FAIL: the rendered DOM has no <body>") or 1
    W, H = int(body.attrs["data-width"]), int(body.attrs["data-height"])
    img = read_png(shot)
    if (img[0], img[1]) != (W, H):
        errors.append(f"screenshot is {img[0]}x{img[1]}, the page says {W}x{H}")
    bg = pixel(img, 2, 2)
    step = 7
    distinct = {pixel(img, x, y) for y in range(0, min(H, img[1]), step) for x in range(0, min(W, img[0]), step)}
    nonbg = sum(1 for y in range(0, min(H, img[1]), step) for x in range(0, min(W, img[0]), step)
                if pixel(img, x, y) != bg)
    if len(distinct) < 20 or nonbg < 500:
        errors.append(f"screenshot looks blank: {len(distinct)} distinct colours, {nonbg} sampled pixels off the background")
    plots = [n for n in dom.iter() if n.tag == "svg" and "plot" in n.cls()]
    ids = {p.attrs.get("id"): p for p in plots}
    for want in list(expect) + [k.split("/")[0] for k in expect_series] + (["power"] if strips else []):
        if want not in ids:
            errors.append(f"plot {want}: missing from the rendered DOM (have {sorted(ids)})")
    checked = []
    for p in plots:
        pid = p.attrs.get("id")
        claimed = int(p.attrs.get("data-points", "-1"))
        if pid in expect and claimed != expect[pid]:
            errors.append(f"plot {pid}: data-points {claimed}, expected {expect[pid]} from the run's files")
        if p.attrs.get("data-empty"):
            checked.append(f"{pid}: empty ({p.all_text().strip()[:60]}...)")
            continue
        cl = lambda c: [n for n in p.iter() if c in n.cls()]
        if not cl("x-axis") or not cl("y-axis"):
            errors.append(f"plot {pid}: no x or y axis line")
        for axis in ("x-ticks", "y-ticks"):
            g = cl(axis)
            labels = [n for n in (g[0].iter() if g else []) if n.tag == "text" and n.all_text().strip()]
            if len(labels) < 2:
                errors.append(f"plot {pid}: {len(labels)} {axis} labels")
        for t in ("x-title", "y-title"):
            if not any(n.all_text().strip() for n in cl(t)):
                errors.append(f"plot {pid}: no {t}")
        series = cl("series")
        total = 0
        ax, ay, aw, ah = (float(v) for v in p.attrs["data-area"].split())
        px, py = int(p.attrs["data-x"]), int(p.attrs["data-y"])
        for s in series:
            name, n = s.attrs.get("data-name", ""), int(s.attrs.get("data-points", "-1"))
            total += n
            key = f"{pid}/{name}"
            if key in expect_series and n != expect_series[key]:
                errors.append(f"series {key}: data-points {n}, expected {expect_series[key]}")
            polys = [c for c in s.iter() if c.tag == "polyline"]
            circles = [c for c in s.iter() if c.tag == "circle"]
            if polys and sum(polyline_points(c) for c in polys) != n:
                errors.append(f"series {key}: polylines hold {sum(polyline_points(c) for c in polys)} points, data-points {n}")
            if circles and len(circles) != n:
                errors.append(f"series {key}: {len(circles)} circles, data-points {n}")
            if n and not polys and not circles:
                errors.append(f"series {key}: {n} points but neither polyline nor circles")
            if n:
                rgb = hex_rgb(s.attrs["data-colour"])
                x0, y0 = int(px + ax) - 3, int(py + ay) - 3
                hits = count_colour(img, x0, y0, int(x0 + aw + 6), int(y0 + ah + 6), rgb, need=2)
                if hits < 2:
                    errors.append(f"series {key}: colour {s.attrs['data-colour']} not in the screenshot inside the plot area "
                                  f"({x0},{y0} {aw:.0f}x{ah:.0f})")
        if total != claimed:
            errors.append(f"plot {pid}: series add up to {total} points, data-points says {claimed}")
        named = [s for s in series if s.attrs.get("data-name")]
        if len(named) > 1 and len(cl("legend-item")) < len(named):
            errors.append(f"plot {pid}: {len(named)} named series, {len(cl('legend-item'))} legend entries")
        checked.append(f"{pid}: {claimed} points in {len(series)} series")
    if strips:
        p = ids.get("power")
        rects = [n for n in p.iter() if "state" in n.cls() and n.tag == "rect"] if p else []
        px, py = (int(p.attrs["data-x"]), int(p.attrs["data-y"])) if p else (0, 0)
        for st, k in strips.items():
            hit = [r for r in rects if r.attrs.get("data-state") == st and int(r.attrs["data-snapshots"]) >= k]
            if not hit:
                errors.append(f"power strip: no {st} stretch of >= {k} snapshots "
                              f"(have {[(r.attrs.get('data-state'), r.attrs.get('data-snapshots')) for r in rects]})")
                continue
            r = hit[0]
            x = int(px + float(r.attrs["x"]) + float(r.attrs["width"]) / 2)
            y = int(py + float(r.attrs["y"]) + float(r.attrs["height"]) / 2)
            got, want = pixel(img, x, y), hex_rgb(r.attrs["fill"])
            if max(abs(a - b) for a, b in zip(got, want)) > 12:
                errors.append(f"power strip: the {st} stretch at ({x},{y}) shows {got}, its colour is {want}")
            checked.append(f"strip: {st} stretch of {r.attrs['data-snapshots']} snapshots drawn in {r.attrs['fill']}")
    for c in checked:
        print("  " + c)
    if errors:
        for e in errors:
            print("FAIL: " + e)
        return 1
    print(f"ok: {page}: {len(plots)} plots rendered, {W}x{H} screenshot, {len(distinct)} colours")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
