"""The project's modules import each other without a cycle, counting imports inside functions."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("pipelines", "commands", "runs", "transforms", "schemas")


def _modules() -> dict[str, str]:
    found = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found[module.removesuffix(".__init__")] = path
    return found


def _imports(path: str, modules: dict[str, str]) -> set[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):  # every import, also those deferred into a function
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} & modules.keys()
            out |= {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names} & modules.keys()
    return out


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles, state, stack = [], {}, []

    def visit(module: str) -> None:
        state[module] = "open"
        stack.append(module)
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == "open":
                cycles.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


def test_find_cycles_finds_one():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_cycle():
    modules = _modules()
    assert "transforms.chunking.split" in modules
    graph = {m: _imports(p, modules) - {m} for m, p in modules.items()}
    # a package's __init__ re-exporting its modules is not a cycle of the modules themselves
    for package in [m for m, p in modules.items() if p.endswith("__init__.py")]:
        for module in graph:
            if module.startswith(package + "."):
                graph[module].discard(package)
    assert find_cycles(graph) == []
