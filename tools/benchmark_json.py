"""benchmark_json.py: what the report scripts read from Google Benchmark's JSON output --
each benchmark's repetitions and their times -- and the one way they summarise them:
the median with the interquartile range (quartiles interpolated linearly, as
common::Spread does for memopt's own measurements)."""

import json
import statistics

NS_PER_UNIT = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def repetitions(path):
    """The benchmark JSON at `path` and, per run name, its repetitions (not the aggregates)."""
    with open(path) as f:
        j = json.load(f)
    reps = {}
    for b in j["benchmarks"]:
        if b.get("run_type") == "iteration":
            reps.setdefault(b["run_name"], []).append(b)
    return j, reps


def time_ns(b, field="real_time"):
    """One repetition's time per iteration in nanoseconds (`field`: real_time or cpu_time)."""
    return b[field] * NS_PER_UNIT[b["time_unit"]]


def quartiles(values):
    """(first quartile, median, third quartile)."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3
