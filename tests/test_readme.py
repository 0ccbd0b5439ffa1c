"""README.md's Python snippets run as written.

Every ```python block of the README follows a marker line, invisible on
GitHub, that says what this test does with it:

- `<!-- readme-test: run -->`: runs on every backend;
- `<!-- readme-test: run on jax -->`: runs on that backend only;
- `<!-- readme-test: raises ValueError -->`: runs and must end in that error
  (a snippet that shows an error message);
- `<!-- readme-test: skip (why) -->`: not run, for the reason given.

A `# prints "<text>"` comment must be printed by the snippet, and a
`# SomeError: <message> ...` comment must start the raised error's message.

Each block runs as pasted into a new file: in an empty namespace, with the
working directory in a temporary folder.
"""

import builtins
import os
import re
import warnings

import keras
import pytest

import keras_boost as boost

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
MARKER = re.compile(r"<!-- readme-test: (run|run on \w+|raises \w+|skip \(.+\)) -->")


def snippets():
    """(line number, marker, code) of every ```python block of the README."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    found = []
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        previous = text[: match.start() - 1].rsplit("\n", 1)[-1]
        marker = MARKER.fullmatch(previous)
        found.append((line, marker.group(1) if marker else None, match.group(1)))
    return found


SNIPPETS = snippets()
PRINTS = re.compile(r'# prints "(.+?)"')
ERROR_SHOWN = re.compile(r"^# \w+Error: (.+?)(?: \.\.\.)?$", re.M)


@pytest.fixture
def namespace(tmp_path, monkeypatch):
    """A fresh module namespace: a snippet brings its own imports, data and
    model, as a user pasting it into a new file would."""
    monkeypatch.chdir(tmp_path)  # snippets save files
    keras.utils.set_random_seed(0)
    yield {"__name__": "__main__"}
    if keras.backend.backend() == "jax":
        keras.distribution.set_distribution(None)


def test_every_snippet_says_whether_it_runs():
    assert len(SNIPPETS) >= 7, "README.md lost its Python snippets?"
    unmarked = [line for line, marker, _ in SNIPPETS if marker is None]
    assert not unmarked, (
        f"README.md lines {unmarked}: put <!-- readme-test: run --> (or run on <backend>, "
        "raises <Error>, skip (why)) on the line before each ```python block"
    )


@pytest.mark.parametrize(
    "line, marker, code",
    [pytest.param(line, marker, code, id=f"line{line}") for line, marker, code in SNIPPETS
     if marker and not marker.startswith("skip")],
)
def test_snippet_runs_as_written(line, marker, code, namespace, capsys):
    if marker.startswith("run on ") and marker[len("run on "):] != keras.backend.backend():
        pytest.skip(f"the README runs this snippet {marker[len('run '):]}")
    compiled = compile("\n" * line + code, README, "exec")  # tracebacks give README's lines
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", boost.NoEffectWarning)  # LessBN's notes on this tiny model
        if marker.startswith("raises "):
            with pytest.raises(getattr(builtins, marker[len("raises "):])) as raised:
                exec(compiled, namespace)
            shown = ERROR_SHOWN.search(code)  # "# ValueError: <start of the message> ..."
            if shown:
                assert " ".join(str(raised.value).split()).startswith(shown.group(1)), str(raised.value)
        else:
            exec(compiled, namespace)
    printed = capsys.readouterr().out
    for expected in PRINTS.findall(code):  # `print(...)  # prints "<text>"`
        assert expected in printed, f"README line {line}: {expected!r} not printed:\n{printed}"
