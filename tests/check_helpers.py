"""The exercise checks' triad, in one helper: the right answer passes, the stub is
"not attempted", and a wrong answer fails with its hint."""

from __future__ import annotations

import re


def stub_like(fn):
    """A stub with ``fn``'s name that raises NotImplementedError, as the labs' do."""

    def stub(*args, **kwargs):
        raise NotImplementedError

    stub.__name__ = getattr(fn, "__name__", "stub")
    return stub


def check_triad(check, right, wrong, hint: str, capsys=None) -> None:
    """Hold an exercise check to its three answers.

    Args:
        check: the exercise's check, called as ``check(answer)``.
        right: an answer that must pass (the check returns anything but False).
        wrong: an answer that must fail with ``AssertionError``.
        hint: text the failure's message must contain (matched literally).
        capsys: pytest's capsys, to see "not attempted" printed for the stub.
    """
    import pytest

    assert check(right) is not False, "the right answer did not pass"
    assert check(stub_like(right)) is False, "the stub was not 'not attempted'"
    if capsys is not None:
        assert "not attempted" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=re.escape(hint)):
        check(wrong)
