"""The command line explains itself: plain help text, every option described, a version."""

import pytest

from stanaccel import __version__
from stanaccel.cli import build_parser, main
from stanaccel.programs import bundled_programs


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"stanaccel {__version__}"


@pytest.mark.parametrize("command", [[], ["nuts"], ["sample"], ["run"], ["compile"]])
def test_help_is_plain_text_and_describes_every_option(capsys, command):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    assert "``" not in text and ":class:" not in text  # no RST markup
    parser = build_parser()
    if command:
        parser = parser._subparsers._group_actions[0].choices[command[0]].filled()  # its options, added
    undescribed = [a.dest for a in parser._actions if not a.help]
    assert undescribed == []


def test_help_lists_exactly_the_bundled_programs(capsys):
    with pytest.raises(SystemExit):
        main(["nuts", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    bundled = bundled_programs()
    assert f"({', '.join(bundled)})" in text


def test_a_missing_program_file_is_named_before_the_heavy_imports():
    """``stanaccel sample`` with no such file says so before ArviZ (and the samplers) are imported."""
    import subprocess
    import sys

    script = (
        "import sys\nfrom stanaccel.cli import main\ncode = main(['sample', 'no-such-file.stan', '-q'])\n"
        "print(code, 'arviz' in sys.modules)"
    )
    process = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert process.stdout.split() == ["2", "False"], process.stderr
    assert "Stan program file not found: 'no-such-file.stan'" in process.stderr
