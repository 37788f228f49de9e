#!/usr/bin/env python3
"""Every state variable of a written state machine has one writer.

Reads the ```state-writers block of docs/ARCHITECTURE.md: one line per state
field, `FILE FIELD SETTER`, where FILE is a path under src/ (or a glob),
FIELD the member name (or `ptr->member` for a name that other structs use
too, checked where the owner's pointer has that name) and SETTER the one function allowed to assign it.
Then checks, in every C file under src/:
  - an assignment to FIELD (`->FIELD =` or `.FIELD =`, also `+=` and the
    like) appears only inside SETTER, in FILE;
  - SETTER exists in FILE and checks the transition against a table
    (its body names `legal`).
Prints each violation; exits 1 if any."""
import fnmatch
import glob
import re
import sys


def blocks(path):
    text = open(path).read()
    m = re.search(r"```state-writers\n(.*?)```", text, re.S)
    if not m:
        sys.exit("%s: no ```state-writers block" % path)
    rules = []
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            f, field, setter = line.split()
            rules.append((f, field, setter))
    return rules


FUNC = re.compile(r"^(?:static\s+)?(?:inline\s+)?[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(")


def functions(path):
    """Yields (function name or None, line number, line) for each line."""
    cur = None
    pending = None
    for n, line in enumerate(open(path, errors="replace"), 1):
        if cur is None:
            m = FUNC.match(line)
            if m and not line.rstrip().endswith(";"):
                pending = m.group(1)
            if line.startswith("{") and pending:
                cur, pending = pending, None
            elif line.rstrip().endswith(";") or line.strip() == "":
                pending = None if line.strip() == "" else pending
        yield cur, n, line
        if cur is not None and line.startswith("}"):
            cur = None


def main():
    rules = blocks("docs/ARCHITECTURE.md")
    bad = 0
    files = sorted(glob.glob("src/**/*.c", recursive=True))
    # One member name may be the state of two machines (an iSCSI connection's
    # and a task's `st`): an assignment to it is fine inside any of its setters.
    by_member = {}
    for pat, field, setter in rules:
        by_member.setdefault(field, []).append((pat, setter))
    for field, owners in sorted(by_member.items()):
        # `ptr->member`: a member name other structs use too (a wire
        # struct's `disk`), checked where the state's owner is named `ptr`.
        lhs = (r"\b" + re.escape(field)) if "->" in field else r"(?:->|\.)" + re.escape(field)
        assign = re.compile(lhs + r"\s*(?:[-+|&^]|<<|>>)?=(?!=)")
        for path in files:
            for fn, n, line in functions(path):
                code = line.split("//", 1)[0]
                if assign.search(code) and not any(
                        fnmatch.fnmatch(path, pat) and fn == setter for pat, setter in owners):
                    print("%s:%d: %s assigned outside %s (in %s): %s"
                          % (path, n, field, " / ".join(st for _, st in owners), fn,
                             line.strip()))
                    bad += 1
    for pat, field, setter in rules:
        paths = [f for f in files if fnmatch.fnmatch(f, pat)]
        body = [line for f in paths for fn, _, line in functions(f) if fn == setter]
        if not body:
            print("%s: setter %s of %s not found" % (pat, setter, field))
            bad += 1
        elif not any("legal" in line for line in body):
            print("%s: %s does not check the transition (no legal table)" % (pat, setter))
            bad += 1
    if bad:
        sys.exit(1)
    print("state writers: %d fields, each assigned in its one setter" % len(rules))


def setter_in(path, setter):
    return any(fn == setter for fn, _, _ in functions(path))


if __name__ == "__main__":
    main()
