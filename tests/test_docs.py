"""The docs keep up with the code: every public name is in the API reference.

The site (`mkdocs.yml`, built by `tox -e docs` with `--strict`) renders the
`::: keras_boost.<module>.<name>` lines of `docs/api/*.md`; a name added to a
public module without such a line would be missing from the reference, so it
fails here, on every backend, without building the site. The size limits of the
README and the method cards (issue 29) are checked here too.
"""

import glob
import importlib
import os
import re
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
API_PAGES = glob.glob(os.path.join(ROOT, "docs", "api", "*.md"))
SUBPACKAGES = ("layers", "optimizers", "callbacks", "surgery", "ops", "precision", "pruning",
               "quantization", "distribute", "tune", "schedules", "config", "datasets", "bench")
DIRECTIVE = re.compile(r"^::: (keras_boost(?:\.\w+)*)\s*$", re.M)


def documented():
    """The dotted paths the API reference renders."""
    paths = set()
    for page in API_PAGES:
        with open(page, encoding="utf-8") as f:
            paths.update(DIRECTIVE.findall(f.read()))
    return paths


def public_names(module):
    """`__all__` (dunders such as `__version__` aside), or else the names the
    module defines or re-exports from keras_boost."""
    if hasattr(module, "__all__"):
        return [name for name in module.__all__ if not name.startswith("__")]
    return [
        name for name in dir(module)
        if not name.startswith("_")
        and not isinstance(getattr(module, name), types.ModuleType)
        and getattr(getattr(module, name), "__module__", "").startswith("keras_boost")
    ]


def public_modules():
    """keras_boost, its public subpackages, and any other module its `__all__` exports."""
    import keras_boost

    names = set(SUBPACKAGES) | {
        name for name in public_names(keras_boost)
        if isinstance(getattr(keras_boost, name), types.ModuleType)
    }
    return ["keras_boost"] + [f"keras_boost.{name}" for name in sorted(names)]


def resolve(path):
    """The object a `::: path` line renders: the parent's attribute, else the module.

    The attribute comes first because a package may bind a name to a module it does not hold
    (`keras_boost.surgery.patterns` is `keras_boost.algorithms.less_bn.patterns`).
    """
    module_name, _, name = path.rpartition(".")
    parent = importlib.import_module(module_name)
    if hasattr(parent, name):
        return getattr(parent, name)
    return importlib.import_module(path)


@pytest.mark.parametrize("module_name", public_modules())
def test_every_public_name_is_in_the_api_reference(module_name):
    module = importlib.import_module(module_name)
    paths = documented()
    # A name is documented at its public path, or where it is defined (what a
    # lazily exported name needs: mkdocstrings reads the source, not `__getattr__`).
    rendered = {id(resolve(path)) for path in paths}
    missing = [
        name for name in public_names(module)
        if f"{module_name}.{name}" not in paths and id(getattr(module, name)) not in rendered
    ]
    assert not missing, (
        f"{module_name}: {missing} not in the API reference; add a line "
        f"'::: {module_name}.<name>' for each to its page in docs/api/"
    )


def test_every_api_reference_entry_exists():
    """A renamed or removed name must leave the reference too (else `mkdocs build` fails)."""
    missing = []
    for path in sorted(documented()):
        try:
            resolve(path)
        except (ImportError, AttributeError):
            missing.append(path)
    assert not missing, f"docs/api/ names {missing}, which do not exist: remove or rename them"


def test_readme_is_at_most_12_kb():
    size = os.path.getsize(os.path.join(ROOT, "README.md"))
    assert size <= 12 * 1024, f"README.md is {size} bytes; move details to docs/ (at most 12288)"


@pytest.mark.parametrize(
    "card", sorted(glob.glob(os.path.join(ROOT, "docs", "methods", "*.md"))), ids=os.path.basename
)
def test_method_card_is_at_most_150_lines(card):
    with open(card, encoding="utf-8") as f:
        lines = f.read().count("\n")
    assert lines <= 150, (
        f"{os.path.basename(card)} has {lines} lines; move measured history to "
        "benchmarks/results/JOURNAL.md (at most 150)"
    )
