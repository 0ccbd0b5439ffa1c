"""The package's layout rules (issue 29).

- the import graph has no cycles, lazy (function-level) imports included;
- only `keras_boost/backend/` imports TensorFlow, JAX or PyTorch;
- an algorithm package (`keras_boost/algorithms/<name>/`) is reached only
  through its `__init__` from outside it;
- no module outside `algorithms/` only re-exports unless it is a package
  `__init__` (a public namespace such as `keras_boost.layers`): the old
  module paths' shims are gone;
- `model.py` and `backend/` name no algorithm in their code;
- only `keras_boost/keras_private.py` imports `keras.src`;
- every public module says what it exports (`__all__`).
"""

import ast
import pathlib
import re

import keras_boost

PACKAGE = pathlib.Path(keras_boost.__file__).parent


def module_name(path, package=PACKAGE):
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# The console script: a top-level module beside the package (its command
# line answers before Keras is imported), part of the same import graph.
TOP_LEVEL_MODULES = ("keras_boost_cli",)


def package_sources(package=PACKAGE, top_level=TOP_LEVEL_MODULES):
    """`{module name: source}` of a package's modules and the top-level modules beside it."""
    sources = {module_name(p, package): p.read_text() for p in package.rglob("*.py")}
    for name in top_level:
        sources[name] = (package.parent / f"{name}.py").read_text()
    return sources


def import_graph(sources=None):
    """`{module: the modules it imports}`, lazy (function-level) imports included."""
    sources = package_sources() if sources is None else sources
    graph = {}
    for name, source in sources.items():
        edges = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                # `from keras_boost import ops` imports the module keras_boost.ops.
                targets = [f"{node.module}.{a.name}" for a in node.names]
                targets = [t if t in sources else node.module for t in targets]
            else:
                continue
            edges.update(t for t in targets if t in sources and t != name)
        # Every edge counts, a package's `__init__` importing its own modules
        # included: leaving those out hid the circle accumulation ->
        # batch_size -> accumulation, which ran through both `__init__`s.
        # Only `keras_boost` itself is left out: importing it is importing the
        # whole public API, which no module does at import time.
        graph[name] = {t for t in edges if t != "keras_boost"}
    return graph


def find_cycle(graph):
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_import_graph_has_no_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_holds_the_console_script_and_its_lazy_imports():
    graph = import_graph()
    assert "keras_boost_cli" in graph and "keras_boost.bench.cli" in graph["keras_boost_cli"]
    # The circle the bench's command line once had: its parser imported
    # from the console script, which imports `run` from it in a function.
    circle = {
        "keras_boost_cli": "def main():\n    from keras_boost.bench.cli import run\n",
        "keras_boost.bench.cli": "from keras_boost_cli import parse_args\n",
    }
    assert find_cycle(import_graph(circle)) == ["keras_boost.bench.cli", "keras_boost_cli", "keras_boost.bench.cli"]


def test_import_graph_sees_a_circle_through_package_inits(tmp_path):
    # The shape accumulation <-> batch_size had: each package's `__init__`
    # imports its own module, which imports the other package (one lazily).
    files = {
        "pkg/__init__.py": "",
        "pkg/a/__init__.py": "from pkg.a.opt import Opt\n",
        "pkg/a/opt.py": "from pkg.b import norm\n",
        "pkg/b/__init__.py": "from pkg.b.callback import norm\n",
        "pkg/b/callback.py": "def norm():\n    from pkg.a import Opt\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert find_cycle(import_graph(package_sources(tmp_path / "pkg", top_level=()))) == ["pkg.a", "pkg.a.opt", "pkg.b", "pkg.b.callback", "pkg.a"]


def test_only_the_backend_seams_import_a_backend_framework():
    allowed_prefix = "keras_boost.backend."
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        if name.startswith(allowed_prefix) or name.startswith("keras_boost.bench"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(n.split(".")[0] in ("tensorflow", "jax", "torch") for n in names):
                offenders.append(name)
    assert offenders == [], offenders


# --- algorithm packages are reached through their __init__ -----------------

ALGORITHMS = PACKAGE / "algorithms"


def algorithm_packages():
    return sorted(p.name for p in ALGORITHMS.iterdir() if (p / "__init__.py").is_file())


def package_exports(name):
    """The names `keras_boost.algorithms.<name>` lists in its `__all__`."""
    tree = ast.parse((ALGORITHMS / name / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def imported_modules(tree):
    """`(module path, imported name or None)` for every import in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                yield node.module, alias.name


def algorithm_path_imports():
    """`(importing module, imported path)` for each import of an algorithm
    package's module from outside that package."""
    packages = algorithm_packages()
    offenders = set()
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        for module, imported in imported_modules(ast.parse(path.read_text())):
            parts = module.split(".")
            if parts[:2] != ["keras_boost", "algorithms"] or len(parts) < 3 or parts[2] not in packages:
                continue
            home = ".".join(parts[:3])
            if name == home or name.startswith(home + "."):
                continue  # inside the package
            if len(parts) > 3:
                offenders.add((name, module))
            elif imported is not None and (ALGORITHMS / parts[2] / f"{imported}.py").is_file() \
                    and imported not in package_exports(parts[2]):
                offenders.add((name, f"{module}.{imported}"))
    return offenders


def test_algorithm_packages_are_reached_through_their_init():
    assert algorithm_path_imports() == set()


def test_every_algorithm_package_exports_its_names():
    for name in algorithm_packages():
        assert package_exports(name), f"keras_boost/algorithms/{name}/__init__.py has no __all__"


# --- no re-export shim outside a package __init__ ---------------------------

def only_reexports(tree):
    """Whether a module's body is a docstring, imports and `__all__`, and nothing else."""
    def reexport_part(node):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return True
        return isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]

    return any(isinstance(n, ast.ImportFrom) for n in tree.body) and all(reexport_part(n) for n in tree.body)


def reexport_shims(package=PACKAGE):
    """Modules outside `algorithms/` that only re-export and are not a package `__init__`."""
    return sorted(
        module_name(path, package) for path in package.rglob("*.py")
        if path.name != "__init__.py" and "algorithms" not in path.relative_to(package).parts
        and only_reexports(ast.parse(path.read_text()))
    )


def test_no_reexport_shim_outside_a_package_init():
    assert reexport_shims() == []


def test_reexport_shim_finder_finds_a_shim(tmp_path):
    (tmp_path / "pkg" / "layers").mkdir(parents=True)
    (tmp_path / "pkg" / "layers" / "__init__.py").write_text("from pkg.algorithms.x import Dense\n")
    (tmp_path / "pkg" / "layers" / "dense.py").write_text(
        '"""Old path."""\n\nfrom pkg.algorithms.x import Dense  # noqa: F401\n\n__all__ = ["Dense"]\n')
    (tmp_path / "pkg" / "saving.py").write_text("import keras\n\n\ndef register():\n    return keras\n")
    assert reexport_shims(tmp_path / "pkg") == ["pkg.layers.dense"]


# --- model.py and backend/ name no algorithm ---------------------------------

# The algorithm packages' names and the words that name an algorithm.
ALGORITHM_WORDS = set(algorithm_packages()) | {
    "freeze", "frozen", "loss_scale_group", "group_loss_scale", "dim_reduce", "adasum", "less_bn",
    "centralize", "prune", "distill", "progressive", "quantize",
}
# Keras words that are not our algorithms' names.
ALGORITHM_WORDS -= {"batch_size"}
# Public API words model.py keeps (MindSpore's names, constructor arguments,
# properties and saved-config keys users and saved files rely on).
PUBLIC_API_WORDS = {
    "loss_scale", "check_adasum_enable", "check_dim_reduce_enable", "freeze_planner", "freeze_decision",
    "precision_choice",
}
_IDENTIFIER_LIKE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
# Known offenders `(module, identifier)`, each with the reason it stays: none.
PENDING_CORE = set()


def _docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                yield id(body[0].value)


def code_words(tree):
    """The identifiers of `tree`'s code: names, attributes, definitions,
    arguments, keywords, imported paths, and identifier-like string constants
    (config keys, `getattr` names); docstrings and prose strings left out."""
    docstrings = set(_docstrings(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.arg):
            yield node.arg
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.arg
        elif isinstance(node, ast.alias):
            yield node.name
            if node.asname:
                yield node.asname
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if _IDENTIFIER_LIKE.match(node.value):
                yield node.value


def names_an_algorithm(word):
    if word in PUBLIC_API_WORDS:
        return None
    parts = re.split(r"[_.]", word.lower())
    for algorithm in sorted(ALGORITHM_WORDS):
        pieces = algorithm.split("_")
        if any(parts[i:i + len(pieces)] == pieces for i in range(len(parts))):
            return algorithm
    return None


def algorithm_names_in_core():
    """`(module, identifier)` pairs where model.py or backend/ name an algorithm."""
    paths = [PACKAGE / "model.py", *sorted((PACKAGE / "backend").glob("*.py"))]
    offenders = set()
    for path in paths:
        for word in code_words(ast.parse(path.read_text())):
            if names_an_algorithm(word):
                offenders.add((module_name(path), word))
    return offenders


def test_model_and_backend_name_no_algorithm():
    assert algorithm_names_in_core() - PENDING_CORE == set()


def test_algorithm_word_matching():
    assert names_an_algorithm("_boost_freeze_optimizer") == "freeze"
    assert names_an_algorithm("keras_boost.algorithms.adasum") == "adasum"
    assert names_an_algorithm("loss_scale") is None  # public API: the constructor argument
    assert names_an_algorithm("freeze_planner") is None
    assert names_an_algorithm("unfrozen_count") is None  # whole words only
    assert names_an_algorithm("batch_size") is None


# --- keras.src only in keras_private -----------------------------------------


def keras_src_imports():
    offenders = set()
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        for module, imported in imported_modules(ast.parse(path.read_text())):
            full = module if imported is None else f"{module}.{imported}"
            if module == "keras.src" or module.startswith("keras.src.") or full.startswith("keras.src"):
                offenders.add((name, module))
    return offenders


def test_only_keras_private_imports_keras_src():
    offenders = {(m, i) for m, i in keras_src_imports() if m != "keras_boost.keras_private"}
    assert offenders - PENDING_CORE == set()


# --- __all__ in every public module ------------------------------------------


def modules_without_all():
    missing = set()
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        if any(part.startswith("_") for part in name.split(".")) or path.name == "__main__.py":
            continue  # private modules and entry points export nothing
        tree = ast.parse(path.read_text())
        if not any(isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign))
                   for n in tree.body):
            continue  # a docstring-only package: nothing to export
        if not any(isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in n.targets)
                   for n in tree.body):
            missing.add(name)
    return missing


# version.py, which no task owns, still without `__all__`: the integrator
# empties this set.
PENDING_ALL = set()


def test_every_public_module_has_all():
    assert modules_without_all() - PENDING_ALL == set()
