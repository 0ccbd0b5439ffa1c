"""The package's import graph has no cycles, lazy (function-level) imports included."""

import ast
import pathlib

import keras_boost

PACKAGE = pathlib.Path(keras_boost.__file__).parent


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph():
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                # `from keras_boost import ops` imports the module keras_boost.ops.
                targets = [f"{node.module}.{a.name}" for a in node.names]
                targets = [t if t in modules else node.module for t in targets]
            else:
                continue
            edges.update(t for t in targets if t in modules and t != name)
        # A package's __init__ importing its own modules is how packages
        # export names; the reverse (a module importing its package) is not.
        graph[name] = {t for t in edges if not (name == t.rsplit(".", 1)[0] or t == "keras_boost")}
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
