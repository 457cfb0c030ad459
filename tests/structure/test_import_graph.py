"""The stages import one way (docs/architecture.md): contracts < pretraining < benchmarks < analysis <
paper_figures < reproduce, and no module imports itself back through others. Every import counts,
also the ones inside functions; imports are read with `ast`, nothing is executed."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("contracts", "pretraining", "benchmarks", "analysis", "paper_figures", "reproduce")
STANDALONE = ("container",)  # builds the image; imports no stage and no stage imports it


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in (*STAGES, *STANDALONE) for p in sorted((ROOT / package).rglob("*.py"))}


def _imported(path: Path, name: str, known) -> set[str]:
    """The modules of ours that `path` imports: `from a.b import c` counts as a.b.c when c is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known)
    resolved = set()
    for module in found:
        while module and module not in known:  # a name inside a module -> that module
            module = module.rpartition(".")[0]
        if module and module != name:
            resolved.add(module)
    return resolved


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(path, name, modules) for name, path in modules.items()}


def stage_violations(graph: dict[str, set[str]]) -> list[str]:
    rank = {stage: i for i, stage in enumerate(STAGES)}
    bad = []
    for module, targets in graph.items():
        for target in targets:
            mine, theirs = module.split(".")[0], target.split(".")[0]
            if mine == theirs:
                continue
            if mine in STANDALONE or theirs in STANDALONE or rank[theirs] > rank[mine]:
                bad.append(f"{module} imports {target}")
    return sorted(bad)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_stage_is_a_package_the_graph_sees():
    graph = import_graph()
    for stage in STAGES:
        assert stage in graph, stage
    assert "reproduce.plan" in graph["reproduce.cli"] and "contracts.paper" in graph["pretraining.registry"]


def test_no_stage_imports_a_later_one():
    assert stage_violations(import_graph()) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_checks_catch_what_they_are_for():
    graph = {
        "paper_figures.cli": {"reproduce.plan"},
        "reproduce.plan": {"paper_figures.cli"},
        "contracts.paper": {"pretraining.registry"},
        "pretraining.registry": {"contracts.paper"},
    }
    assert stage_violations(graph) == [
        "contracts.paper imports pretraining.registry",
        "paper_figures.cli imports reproduce.plan",
    ]
    assert sorted(cycles(graph)) == [
        ["contracts.paper", "pretraining.registry"],
        ["paper_figures.cli", "reproduce.plan"],
    ]
