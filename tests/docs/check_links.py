"""check_links.py: every link in README.md, docs/ and results/'s index resolves, and
every citation of a documentation page by section name, anywhere in the tree, names a
section that page has.

    python3 tests/docs/check_links.py [REPO]

A link is [text](target) or ![text](target): a relative target must be a file or
folder of the repository (from the page's folder), and a #fragment must be a heading
of the target page (GitHub's anchors: lower case, punctuation dropped, spaces to
hyphens). A citation is `docs/<page>.md, "Section"` (several sections: `"A" and "B"`) in
any source, script or page: the page must exist and have a heading with that text,
its number (`5.2 `) aside. A citation by number (`docs/<page>.md section 5.2`) is a
failure too: numbers move when a page grows, names say what is meant. Prints every
failure with its file and line; exits 1 if any.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CITATION = re.compile(r'docs/([A-Za-z0-9_]+\.md),? ((?:"[^"\n]+"(?:,? (?:and|or) |, )?)+)')
NUMBERED_CITATION = re.compile(r"docs/[A-Za-z0-9_]+\.md,? (?:sections?|§) ?\d")
SECTION = re.compile(r'"([^"\n]+)"')
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
CODE_FENCE = re.compile(r"^\s*```")


def raw_headings(path):
    """The headings of a markdown page as written, outside code blocks."""
    out = []
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if CODE_FENCE.match(line):
                in_code = not in_code
                continue
            m = None if in_code else HEADING.match(line)
            if m:
                out.append(m.group(1))
    return out


def headings(path):
    """The headings' names, their numbers (`5.2 `) aside."""
    return [re.sub(r"^\d+(\.\d+)*\.?\s+", "", h) for h in raw_headings(path)]


def anchor(heading):
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    return {anchor(h) for h in raw_headings(path)}


def tracked_files(repo):
    listed = subprocess.run(["git", "-C", repo, "ls-files", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True)
    if listed.returncode != 0:  # not a git checkout: every file
        return [os.path.relpath(os.path.join(d, f), repo) for d, _, fs in os.walk(repo) for f in fs]
    return [p for p in listed.stdout.splitlines() if p]


def main():
    repo = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    failures = []
    files = tracked_files(repo)
    pages = ["README.md", "results/README.md", "results/HISTORY.md"] + sorted(
        p for p in files if p.startswith("docs/") and p.endswith(".md"))
    for page in pages:
        path = os.path.join(repo, page)
        in_code = False
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if CODE_FENCE.match(line):
                    in_code = not in_code
                    continue
                if in_code:
                    continue
                for target in LINK.findall(line):
                    if re.match(r"^[a-z]+:", target):
                        continue  # http:, https:, mailto:
                    file_part, _, fragment = target.partition("#")
                    resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                    if not os.path.exists(resolved):
                        failures.append(f"{page}:{number}: link to {target}: no such file")
                    elif fragment and resolved.endswith(".md") and fragment not in anchors(resolved):
                        failures.append(f"{page}:{number}: link to {target}: no heading with that anchor")
    docs_headings = {}
    for rel in files:
        if rel.startswith("build") or not rel.endswith((".h", ".cpp", ".cu", ".py", ".sh", ".md", ".txt")):
            continue
        path = os.path.join(repo, rel)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for m in NUMBERED_CITATION.finditer(text):
            number = text.count("\n", 0, m.start()) + 1
            failures.append(f"{rel}:{number}: cites {m.group(0)}...: cite the section by its name")
        for m in CITATION.finditer(text):
            page = m.group(1)
            number = text.count("\n", 0, m.start()) + 1
            target = os.path.join(repo, "docs", page)
            if not os.path.exists(target):
                failures.append(f"{rel}:{number}: cites docs/{page}, which does not exist")
                continue
            if page not in docs_headings:
                docs_headings[page] = headings(target)
            for section in SECTION.findall(m.group(2)):
                if section not in docs_headings[page]:
                    failures.append(f'{rel}:{number}: cites docs/{page}, "{section}": no such section there')
    for failure in failures:
        print(failure)
    print(f"{len(pages)} pages, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
