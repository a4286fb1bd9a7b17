"""Reads the `console` blocks of a Markdown guide as a transcript (commands and what they print)
and checks a real run against it, so that a guide's commands and sample outputs cannot drift from
the tool.

In a block, a line starting with `$ ` is a command, and the lines after it, up to the next
command, are what it prints (the test running the guide says which streams, in which order). A
sample line may leave out what varies between runs: `...` inside a line stands for any text, and a line that is only `...` for any number of lines
(none included). A `(exit status N)` in the paragraph right after a block states the exit status
of the block's last command; commands whose status the guide does not state are not checked."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ELLIPSIS = "..."
_FENCE = re.compile(r"^```(\w*)\s*$")
_EXIT_STATUS = re.compile(r"\(exit status (\d+)\)")


@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)
    exit_status: int | None = None
    line: int = 0  # the command's line in the guide, for messages


def read_steps(markdown: str) -> list[Step]:
    """Every command of every `console` block, in order, with its sample output."""
    steps: list[Step] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence or fence.group(1) != "console":
            i += 1
            continue
        block: list[Step] = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            text = lines[i]
            if text.startswith("$ "):
                block.append(Step(text[2:].strip(), line=i + 1))
            elif block:
                block[-1].expected.append(text.rstrip())
            else:
                raise ValueError(f"line {i + 1}: a console block must start with a '$ ' command, not {text!r}")
            i += 1
        if i == len(lines):
            raise ValueError(f"line {block[0].line if block else i}: a console block is not closed")
        i += 1
        status = _EXIT_STATUS.search(_next_paragraph(lines, i))
        if status and block:
            block[-1].exit_status = int(status.group(1))
        steps.extend(block)
    return steps


def _next_paragraph(lines: list[str], start: int) -> str:
    while start < len(lines) and not lines[start].strip():
        start += 1
    end = start
    while end < len(lines) and lines[end].strip() and not lines[end].startswith("```"):
        end += 1
    return " ".join(lines[start:end])


def _line_pattern(sample: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in sample.split(ELLIPSIS)) + r"\Z", re.DOTALL)


def mismatch(expected: list[str], actual: list[str]) -> str | None:
    """None when ``actual`` (trailing spaces ignored) matches the sample ``expected``; otherwise the
    first sample line that cannot be matched, with the actual lines around where it was looked for."""
    actual = [line.rstrip() for line in actual]
    patterns = [None if line == ELLIPSIS else _line_pattern(line) for line in expected]
    # reach[j] = the sample's first i lines can match the output's first j lines.
    reach = [True] + [False] * len(actual)
    furthest = (0, 0)  # (sample lines matched, output lines used) at the furthest point reached
    for i, pattern in enumerate(patterns):
        nxt = [False] * (len(actual) + 1)
        for j, ok in enumerate(reach):
            if not ok:
                continue
            if pattern is None:
                for k in range(j, len(actual) + 1):
                    nxt[k] = True
                break
            if j < len(actual) and pattern.match(actual[j]):
                nxt[j + 1] = True
        if not any(nxt):
            at = max(j for j, ok in enumerate(reach) if ok)
            shown = "\n".join(f"    | {line}" for line in actual[at:at + 5]) or "    (no more output)"
            return f"sample line {i + 1} {expected[i]!r} does not match the output from its line {at + 1}:\n{shown}"
        reach = nxt
        furthest = (i + 1, max(j for j, ok in enumerate(reach) if ok))
    if not reach[len(actual)]:
        extra = "\n".join(f"    | {line}" for line in actual[furthest[1]:furthest[1] + 5])
        return f"the output goes on after the sample's last line:\n{extra}"
    return None
