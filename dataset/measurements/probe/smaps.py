"""Huge-page share of a mapping, read from /proc/self/smaps (shared by the studies here)."""

def huge_share(addr):
    """AnonHugePages / Rss of the mapping holding addr, from /proc/self/smaps."""
    cur = None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                cur = lo <= addr < hi
                rss = huge = 0
            elif cur and head == "Rss:":
                rss = int(line.split()[1])
            elif cur and head == "AnonHugePages:":
                huge = int(line.split()[1])
                return round(huge / rss, 3) if rss else 0.0
    return None
