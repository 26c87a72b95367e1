"""Every code block in README.md and docs/*.md runs, so the pages cannot drift from the code
(the convention is in docs/index.md, "How these pages are tested").

Each page becomes one Python script, run in a fresh process from a temporary directory that
holds a link to the repository's samples/: its ```python blocks in order (one namespace, as
in a notebook; kiln reads functions from this file), and its ```console blocks as the
commands they show (`$ kiln ...`, `$ python ...`, run by the script, which fails when one
does). A ```output block right after a python or console block is that block's exact output.
Blocks tagged text, json, c, output and make are not run; any other tag, or none, fails."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
RUN = {"python", "console"}
SHOWN = {"text", "json", "c", "output", "make"}
# Commands a console block may show without running them: the set-up the README describes.
SETUP = ("make ", "source ", ". .venv/bin/activate", "pip ", "git clone", "cd ")
MARK = "@@kiln-docs-block@@"


def blocks(page):
    """(tag, code, line) of every fenced block of `page`."""
    out, lines, k = [], page.read_text().split("\n"), 0
    while k < len(lines):
        if lines[k].startswith("```"):
            tag, start, k = lines[k][3:].strip(), k + 1, k + 1
            while not lines[k].startswith("```"):
                k += 1
            out.append((tag, "\n".join(lines[start:k]), start))
        k += 1
    return out


def _continued(code):
    """Join backslash continuations: a console block's commands as single lines."""
    joined, pending = [], ""
    for line in code.split("\n"):
        if pending:
            line = pending + " " + line.strip()
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        joined.append(line)
    return [line[2:] for line in joined if line.startswith("$ ")]


def script(page):
    """The page as one Python script, and the expected outputs: {block index: text}."""
    parts = ["import subprocess, sys, os, shlex",
             "def _run(command):",
             "    words = shlex.split(command)",
             "    if words[0] == 'kiln':",
             "        words = [sys.executable, '-m', 'kiln.cli'] + words[1:]",
             "    elif words[0] == 'python':",
             "        words = [sys.executable] + words[1:]",
             "    out = subprocess.run(words, capture_output=True, text=True)",
             "    sys.stdout.write(out.stdout)",
             "    if out.returncode:",
             "        sys.stderr.write(out.stderr)",
             "        raise SystemExit(f'command failed ({out.returncode}): {command}')"]
    expected, found = {}, blocks(page)
    for index, (tag, code, line) in enumerate(found):
        if tag not in RUN | SHOWN:
            raise AssertionError(f"{page.name}:{line}: a fence tagged {tag!r}: tag every block "
                                 f"with one of {sorted(RUN | SHOWN)}")
        if tag == "output":
            before = found[index - 1][0] if index else None
            assert before in RUN, f"{page.name}:{line}: an output block follows no code block"
            expected[index - 1] = code
            continue
        if tag not in RUN:
            continue
        parts.append(f"print({MARK!r} + ' {index}', flush=True)")
        if tag == "python":
            parts.append(f"# {page.name}:{line}\n" + code)
        else:
            for command in _continued(code):
                if not command.startswith(SETUP):
                    parts.append(f"_run({command!r})")
    return "\n".join(parts) + "\n", expected


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_code_blocks_run(page, tmp_path):
    source, expected = script(page)
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    path = tmp_path / f"page_{page.stem}.py"
    path.write_text(source)
    env = dict(os.environ, KILN_TRACEBACK="")
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=600)
    assert run.returncode == 0, f"{page.name}: {run.stderr[-4000:]}"
    outputs = {}
    for chunk in run.stdout.split(MARK + " ")[1:]:
        index, _, text = chunk.partition("\n")
        outputs[int(index)] = text
    for index, text in expected.items():
        assert outputs[index].rstrip("\n") == text.rstrip("\n"), (
            f"{page.name}: the output of the block at line {blocks(page)[index][2]} differs:\n"
            f"{outputs[index]}")


def test_every_page_is_linked_from_the_index():
    index = (ROOT / "docs" / "index.md").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        if page.name != "index.md":
            assert f"({page.name})" in index, page.name


def test_no_history_or_outside_links_in_the_readme():
    text = (ROOT / "README.md").read_text()
    assert not re.search(r"\bissue \d+|\bsession \d+|\.\./shared", text)
