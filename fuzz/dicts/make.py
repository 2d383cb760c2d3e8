#!/usr/bin/env python3
"""Writes dicts/<target>.dict for the fuzz targets whose input is TOML or JSON: every table
header, key and quoted keyword found in the target's seeds, plus the syntax tokens of the
format. libFuzzer splices these whole, so it reaches deep fields sooner than by mutating bytes.
Usage: fuzz/dicts/make.py   (rewrites them from seeds/)"""
import os
import re

here = os.path.dirname(os.path.abspath(__file__))
seeds = os.path.join(here, "..", "seeds")
TOML = ["=", "[", "]", "[[", "]]", "{", "}", ",", "\"", "'", "\"\"\"", "'''", "#", "\n",
        "true", "false", "1s", "10m", "2h", "7d", "0", "-1", "1e3", "inf", "nan",
        "1979-05-27T07:32:00Z", "\\u00e9", "\\\\"]
JSON = ["{", "}", "[", "]", ":", ",", "\"", "null", "true", "false", "0", "-1", "1e3", "\\u0000", "\\\""]
targets = {"config": TOML, "plan": TOML, "policy_load": TOML, "reviewer_def": TOML,
           "ledger_entry": JSON}


def escape(t):
    """A dictionary entry's text: printable ASCII as is (quote and backslash escaped), the rest
    as \\xNN bytes."""
    out = []
    for c in t:
        if c in "\"\\":
            out.append("\\" + c)
        elif 32 <= ord(c) < 127:
            out.append(c)
        else:
            out.extend("\\x%02x" % b for b in c.encode())
    return "".join(out)


for target, syntax in targets.items():
    words = set(syntax)
    for root, _, files in os.walk(os.path.join(seeds, target)):
        for f in files:
            text = open(os.path.join(root, f), errors="replace").read()
            words.update(re.findall(r"^\s*(\[\[?[A-Za-z0-9_.\-\"]+\]\]?)", text, re.M))
            words.update(k + " =" for k in re.findall(r"^\s*([A-Za-z0-9_\-]+)\s*=", text, re.M))
            words.update(re.findall(r"\"([a-z][a-z0-9_\-]{1,30})\"", text))
            words.update("\"%s\":" % k for k in re.findall(r"\"([a-z_]+)\":", text))
    with open(os.path.join(here, target + ".dict"), "w") as out:
        out.write("# From seeds/%s and the format's syntax (dicts/make.py).\n" % target)
        for w in sorted(words):
            out.write("\"%s\"\n" % escape(w))
    print(target, len(words))
