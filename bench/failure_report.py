"""What bench/host-failure.sh and bench/disk-failure.sh print: fio's IOPS of
each second and the median of each phase against the median before the
failure (imported by their report scripts)."""
import glob
import statistics


def per_second(w):
    """Reads + writes per second of the run, from fio's iops logs in w."""
    per = {}
    for f in glob.glob(f"{w}/load_iops.*.log"):
        for line in open(f):
            ms, v = line.split(",")[:2]
            s = int(ms) // 1000
            per[s] = per.get(s, 0) + int(v)
    return per


class Report:
    def __init__(self, w, t0):
        self.per = per_second(w)
        self.secs = sorted(self.per)
        self.t0 = t0
        self.base = 0

    def rel(self, t):
        return t - self.t0

    def phase(self, a, b):
        """The seconds whose middle lies in [a, b) (times since t0)."""
        return [self.per[s] for s in self.secs if a <= s + 0.5 < b]

    def rows(self, marks):
        """Every second, four to a line; marks: {absolute time: label}."""
        at = {int(self.rel(t)): m for t, m in marks.items() if t}
        row = [f"{s:3d}s {self.per[s]:6d} {at.get(s, ''):8s}" for s in self.secs]
        print("IOPS per second (reads + writes):")
        for i in range(0, len(row), 4):
            print("  " + "  ".join(row[i:i + 4]))

    def line(self, name, v):
        if not v:
            return f"  {name:28s} -"
        m = statistics.median(v)
        return (f"  {name:28s} median {m:8.0f} IOPS  {m / self.base:5.2f} of before  "
                f"(worst second {min(v):.0f}, {min(v) / self.base:.2f})")

    def phases(self, named):
        """named: [(name, values)], the first the baseline; then the dip."""
        self.base = statistics.median(named[0][1]) if named[0][1] else 1
        for name, v in named:
            print(self.line(name, v))
        return [x for _, v in named[1:-1] for x in v]
