"""`lint --output-format`: concise lines that fit a terminal, full output that keeps the whole
message with the source and the fix, summaries that count safe and unsafe fixes with the flags
that apply each, and a clear usage error for a format it does not know."""

import json
import os
import re

from lint_cli import ROOT, lint

FIXTURES = os.path.join(ROOT, "tests", "lint", "fixtures")
EXAMPLES = os.path.join(ROOT, "examples", "lint")

# A concise line is `LOCATION: CODE [*] MESSAGE`, its message at most 100 characters (the
# linter's kConciseMessageLimit): with ": NM201 [*] " (12) that is LOCATION + 112, so a file named
# in 20 characters at line 9999, column 999 fits a 140-column terminal.
MESSAGE_LIMIT = 100
FINDING_LINE = re.compile(r"^(?P<location>.+?:\d+:\d+): (?P<code>NM\d{3}) (?:\[\*\] )?(?P<message>.*)$")

# One safe fix (NM202), three unsafe ones (NM201's Python check, NM501 and NM301 in a script).
JOB = (
    "import torch.distributed as dist\n"
    "\n"
    "\n"
    "def check(pg, b):\n"
    '    if b.name() == "nccl":\n'
    "        pass\n"
    "    return isinstance(pg, dist.ProcessGroupNCCL)\n"
)
LAUNCH = "export TORCH_DIST_USE_NCCL2=0\nexport PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync\ntorchrun job.py\n"


def write_job(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "launch.sh").write_text(LAUNCH)
    return str(tmp_path)


def json_findings(*args):
    done = lint("--format", "json", *args)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)["findings"]


def test_every_concise_line_fits_and_there_is_one_a_finding():
    # Every rule, on every fixture: the rules' messages run to ~400 characters.
    paths = ["--select", "NM", FIXTURES, EXAMPLES]
    done = lint("--output-format", "concise", *paths)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    findings = json_findings(*paths)
    assert len(lines) == len(findings) > 100
    long_messages = 0
    for line, finding in zip(lines, findings):
        match = FINDING_LINE.match(line)
        assert match, f"not a concise finding line: {line!r}"
        assert match["code"] == finding["code"]
        assert len(match["message"]) <= MESSAGE_LIMIT, line
        assert len(line) <= len(match["location"]) + 12 + MESSAGE_LIMIT, line
        long_messages += len(finding["message"]) > MESSAGE_LIMIT
        if len(finding["message"]) <= MESSAGE_LIMIT:
            assert match["message"] == finding["message"], "a message that fits is kept whole"
    assert long_messages > 50, "the fixtures no longer exercise shortening"


def test_concise_keeps_what_was_found():
    done = lint("--output-format", "concise", os.path.join(EXAMPLES, "legacy_checks.py"))
    assert re.search(
        r"legacy_checks[.]py:9:32: NM201 isinstance check against dist[.]ProcessGroupNCCL is False for the "
        r"rewritten backend\n",
        done.stdout,
    ), done.stdout
    assert "ProcessGroupNCCL2" not in done.stdout, "the why belongs to the full format"


def test_full_is_the_default_and_has_the_whole_message_the_source_and_the_fix(tmp_path):
    root = write_job(tmp_path)
    full = lint(root)
    assert full.returncode == 1, full.stderr
    for finding in json_findings(root):
        assert f":{finding['line']}:{finding['column']}: {finding['code']} " in full.stdout
        assert finding["message"] in full.stdout, finding["message"]
    job = os.path.join(root, "job.py")
    assert f"{job}:5:8: NM202 [*] " in full.stdout, full.stdout
    assert '  5 |     if b.name() == "nccl":\n    |        ^\n' in full.stdout, full.stdout
    assert "    = fix: Compare against every NCCL backend name (safe: --fix applies it)\n" in full.stdout
    assert re.search(r"\n    = fix: .* \(unsafe: --fix --unsafe-fixes applies it\)\n", full.stdout), full.stdout
    assert lint("--output-format", "full", root).stdout == full.stdout
    assert lint("--format", "text", root).stdout == full.stdout, "--format text is the full format"


def test_summary_counts_safe_and_unsafe_fixes_and_names_their_flags(tmp_path):
    root = write_job(tmp_path)
    fixes = [f["fix"] for f in json_findings(root) if f.get("fix")]
    assert [fix["applicability"] for fix in fixes].count("safe") == 1 and len(fixes) == 4, fixes
    summary = "Found 4 migration hazards in 2 files. [*] 1 fixable with --fix; 3 more with --fix --unsafe-fixes.\n"
    assert lint(root).stderr.endswith(summary), lint(root).stderr
    done = lint("--output-format", "concise", root)
    assert done.stderr.endswith(summary), done.stderr

    diff = lint("--diff", root)
    assert diff.returncode == 1
    assert diff.stderr == (
        "1 fix(es) shown; run with --fix to apply them. "
        "3 more with --fix --unsafe-fixes (--diff --unsafe-fixes shows them).\n"
    ), diff.stderr
    diff = lint("--diff", "--unsafe-fixes", root)
    assert diff.stderr == (
        "4 fix(es) shown; run with --fix --unsafe-fixes to apply them (--fix alone applies the 1 safe one).\n"
    ), diff.stderr

    fixed = lint("--fix", root)
    assert fixed.stderr.endswith(
        "Found 3 migration hazards in 2 files. 3 fixable with --fix --unsafe-fixes.\n"
    ), fixed.stderr
    diff = lint("--diff", root)
    assert diff.returncode == 0
    assert diff.stderr == "No fixes --fix applies; 3 with --fix --unsafe-fixes (--diff --unsafe-fixes shows them).\n"


def test_json_sarif_and_gitlab_under_either_option_name(tmp_path):
    root = write_job(tmp_path)
    for form in ("json", "sarif", "gitlab"):
        new = lint("--output-format", form, root)
        old = lint(f"--format={form}", root)
        assert new.returncode == old.returncode == 1
        assert new.stdout == old.stdout, form
        json.loads(new.stdout)


def test_an_unknown_output_format_is_a_usage_error(tmp_path):
    root = write_job(tmp_path)
    for option in ("--output-format", "--format"):
        done = lint(option, "short", root)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert done.stderr.startswith(
            f"nccl-migrate lint: unknown format 'short' for {option}; use full (the default), concise, json, sarif or gitlab\n"
        ), done.stderr
    done = lint("--output-format", root)
    assert done.returncode == 2 and "unknown format" in done.stderr, done.stderr


def test_a_configuration_file_chooses_the_format_and_the_command_line_overrides_it(tmp_path):
    job = write_job(tmp_path)
    (tmp_path / ".nccl-migrate.toml").write_text('output-format = "concise"\n')
    concise = lint(job)
    assert concise.returncode == 1, concise.stderr
    assert all(FINDING_LINE.match(line) for line in concise.stdout.splitlines()), concise.stdout
    overridden = lint("--output-format", "json", job)
    assert json.loads(overridden.stdout)["findings"], overridden.stdout


def test_a_format_the_configuration_file_misnames_is_its_error(tmp_path):
    job = write_job(tmp_path)
    (tmp_path / ".nccl-migrate.toml").write_text('output-format = "short"\n')
    done = lint(job)
    assert done.returncode == 2
    assert "unknown format 'short' for output-format at" in done.stderr and ".nccl-migrate.toml:1" in done.stderr, done.stderr
    assert "usage:" not in done.stderr.lower(), done.stderr  # the file is wrong, not the command line
