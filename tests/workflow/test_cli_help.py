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
