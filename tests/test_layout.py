"""The house's layout, read from the imports of every source file.

The floors (README, "Layout"): the package root (configuration, analysis, Plan) imports
nothing of ours above it; hdl/ builds on it; model/ on both; gen/ and sim/ on all three.
The CLI and its shared options (attenio/cli.py, attenio/options.py) and the sweep are the
face and may call every floor. No module takes another's private name, and no two modules
import each other, however indirectly (lazy imports inside functions count too: a cycle
through them is still two files that cannot be understood apart).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: package -> folder, as pyproject.toml's package-dir maps them
PACKAGES = {"attenio.hdl": "hdl", "attenio.gen": "gen", "attenio.model": "model",
            "attenio.sim": "sim", "attenio": "attenio"}
SOURCES = ("attenio", "hdl", "gen", "model", "sim", "bench", "tests")
#: what each floor may import of ours (the face: attenio.cli, attenio.options, attenio.sweep)
FLOORS = {"attenio": {"attenio"}, "attenio.hdl": {"attenio", "attenio.hdl"},
          "attenio.model": {"attenio", "attenio.hdl", "attenio.model"}}
FACE = ("attenio.cli", "attenio.options", "attenio.sweep")


def module_of(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    for package, folder in PACKAGES.items():
        if parts[0] == folder:
            name = ".".join([package] + parts[1:])
            return name[:-len(".__init__")] if name.endswith(".__init__") else name
    return ".".join(parts)          # bench.*, tests.*


def sources():
    for top in SOURCES:
        yield from sorted((ROOT / top).rglob("*.py"))


MODULES = {module_of(p): p for p in sources()}


def imports(path):
    """(module imported, names taken, line) for every import statement of `path`."""
    name = module_of(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, (), node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            names = tuple(a.name for a in node.names)
            # `from package import module` imports the module
            for n in names:
                if f"{target}.{n}" in MODULES:
                    yield f"{target}.{n}", (), node.lineno
            yield target, tuple(n for n in names if f"{target}.{n}" not in MODULES), node.lineno


def ours(target):
    """The module of ours that `target` names (or None): a package's own name or a file's."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def graph():
    edges = {}
    for name, path in MODULES.items():
        edges[name] = {t for t, _, _ in (
            (ours(t), n, l) for t, n, l in imports(path)) if t and t != name}
    return edges


def test_no_private_name_is_imported_across_modules():
    found = [f"{p.relative_to(ROOT)}:{line}: {target}.{n}"
             for name, p in MODULES.items() for target, names, line in imports(p)
             if ours(target) and ours(target) != name
             for n in names if n.startswith("_") and not n.startswith("__")]
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def module_aliases(path):
    """The names under which `path` binds modules of ours: `from pkg import module`,
    `import a.b as c`."""
    name = module_of(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    bound = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and ours(alias.name) == alias.name:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            for alias in node.names:
                if f"{target}.{alias.name}" in MODULES:
                    bound[alias.asname or alias.name] = f"{target}.{alias.name}"
    return bound


def test_no_private_name_is_used_through_another_module():
    """`module._name` is the same breach as `from module import _name`."""
    found = []
    for name, path in MODULES.items():
        bound = module_aliases(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in bound and bound[node.value.id] != name
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: "
                             f"{bound[node.value.id]}.{node.attr}")
    assert not found, "private names used through another module:\n" + "\n".join(found)


def test_no_import_cycle():
    edges = graph()
    # Tarjan's strongly connected components: any component of two or more is a cycle
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    # a package's __init__ re-exporting its own modules is not a cycle of two files
    cycles = [c for c in cycles
              if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)]
    assert not cycles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def floor_of(module):
    if module.startswith(FACE):
        return None
    for package in sorted(PACKAGES, key=len, reverse=True):
        if module == package or module.startswith(package + "."):
            return package
    return None


@pytest.mark.parametrize("floor", sorted(FLOORS))
def test_each_floor_imports_only_the_floors_below_it(floor):
    bad = [f"{MODULES[name].relative_to(ROOT)} imports {target}"
           for name, targets in graph().items() if floor_of(name) == floor
           for target in sorted(targets) if floor_of(target) not in FLOORS[floor]
           and not target.startswith(FACE)]
    assert not bad, "\n".join(bad)


def test_the_walk_sees_a_known_import():
    """The checks above are only as good as the walk: it must see imports of every kind."""
    edges = graph()
    assert "attenio.model.cyclemodel" in edges["attenio.model.planner"]       # relative
    assert "attenio.model.planner" in edges["attenio.options"]                 # lazy, aliased
    assert "attenio.plan" in edges["attenio.model.cyclemodel"]                 # absolute
    assert module_aliases(ROOT / "sim" / "golden_fp.py")["fp"] == "attenio.hdl.formats.fp"
