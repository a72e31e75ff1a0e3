"""reports_reproduce.py: the cheap reports of results/ run as written and give, at this
commit, exactly what is committed.

    python3 tests/cli/reports_reproduce.py MEMOPT REPO

A report is cheap when it is modeled: its README's commands are one `memopt estimate`
(under "Profile") and one `memopt tradeoff` of the profile it writes, without `--run`
(under "Reproduce"). Each
is run as written, with the report's folder replaced by a temporary one, and the
profile and tradeoff.json it writes must equal the committed ones in every field but
those that name where and how they were made (`command`, `note`, `profile`, `machine`).
So a change that moves any prediction of these reports fails here until
`tools/make_results.sh modeled-gpt2` has regenerated them.
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

PLACE_FIELDS = {"command", "note", "profile", "machine"}


def commands(readme):
    """The report's `memopt estimate` and `memopt tradeoff` lines, as written."""
    estimate = tradeoff = None
    with open(readme, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("memopt estimate ") and estimate is None:
                estimate = line
            elif line.startswith("memopt tradeoff ") and tradeoff is None:
                tradeoff = line
    return estimate, tradeoff


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None


def reads_what_it_estimates(estimate, tradeoff):
    """Whether the tradeoff reads the profile the estimate writes: a report made from a
    measured profile is not cheap, whatever else its README shows."""
    if estimate.endswith("\\") or tradeoff.endswith("\\"):
        return False  # continued on the next line: not one command as written here
    try:
        written, read = flag(shlex.split(estimate), "--out"), flag(shlex.split(tradeoff), "--profile")
    except ValueError:
        return False
    return written is not None and written == read


def differing_fields(committed, made):
    return sorted(k for k in set(committed) | set(made) if k not in PLACE_FIELDS and committed.get(k) != made.get(k))


def main():
    memopt, repo = sys.argv[1], os.path.abspath(sys.argv[2])
    os.chdir(repo)
    failures = checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir("results")):
            readme = os.path.join("results", name, "README.md")
            if not os.path.isfile(readme):
                continue
            estimate, tradeoff = commands(readme)
            if not estimate or not tradeoff or " --run" in tradeoff or not reads_what_it_estimates(estimate, tradeoff):
                continue
            folder = os.path.join("results", name)
            there = os.path.join(tmp, name)
            os.makedirs(there)
            for line in (estimate, tradeoff):
                argv = [memopt] + [a.replace(folder, there) for a in shlex.split(line)[1:]]
                done = subprocess.run(argv, capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"{readme}: `{line}` failed as written:\n{done.stderr[-1500:]}")
                    failures += 1
                    break
            else:
                for made in sorted(os.listdir(there)):
                    if not made.endswith(".json"):
                        continue
                    committed_path = os.path.join(folder, made)
                    if not os.path.exists(committed_path):
                        print(f"{readme}: its commands write {made}, which is not committed")
                        failures += 1
                        continue
                    with open(committed_path) as f:
                        committed = json.load(f)
                    with open(os.path.join(there, made)) as f:
                        now = json.load(f)
                    fields = differing_fields(committed, now)
                    if fields:
                        print(f"{committed_path}: at this commit its command gives other {', '.join(fields)}; "
                              f"regenerate it (tools/make_results.sh)")
                        failures += 1
                checked += 1
    print(f"{checked} cheap reports rerun, {failures} failures")
    if checked == 0:
        print("no cheap report found: the check checked nothing")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
