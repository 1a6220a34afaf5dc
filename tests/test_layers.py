"""The layers (docs/architecture.md): no module imports from a layer to its right.

Pure: every module of the package is parsed (``ast``, nothing imported) and each import of
``dualmpi`` -- at module level or inside a function alike -- is checked against the one
table below.  A module belongs to the layer of the longest prefix that names it; a new
module must be placed in the table (the test says which one is missing).
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dualmpi"

#: The layers, left to right: a module may import its own layer and the layers to its left.
LAYERS = (
    ("base", ("dualmpi.errors", "dualmpi.resources")),
    ("topology", ("dualmpi.topology",)),
    ("collectives", ("dualmpi.collectives",)),
    # pure cost model, clocks and schedule replay: read schedules, so after the collectives;
    # every layer from the plan on may import them
    ("model", ("dualmpi.model", "dualmpi.simulator", "dualmpi.simulate_cost")),
    ("plan", ("dualmpi.engine.arrays", "dualmpi.engine.layout", "dualmpi.engine.plan",
              "dualmpi.engine.stream", "dualmpi.engine.patterns", "dualmpi.engine.virtual")),
    ("engine", ("dualmpi.engine",)),
    ("public face", ("dualmpi", "dualmpi.comm", "dualmpi.calls", "dualmpi.arguments",
                     "dualmpi.msgbuffer", "dualmpi.dlpack", "dualmpi.objects", "dualmpi.ops",
                     "dualmpi.neighbor", "dualmpi.p2p", "dualmpi.request", "dualmpi.support",
                     "dualmpi.derived", "dualmpi.collectives_p2p")),
    ("measure and apps", ("dualmpi.measure", "dualmpi.apps")),
    ("commands", ("dualmpi.commands", "dualmpi.cli", "dualmpi.__main__", "dualmpi.exec",
                  "dualmpi.export", "dualmpi.plotting")),
)


def layer_of(module):
    """Return ``(index, name)`` of the layer of ``module`` (the longest matching prefix), or None.

    A prefix names a module and everything below it; ``dualmpi`` names the package's
    ``__init__`` only.
    """
    best = None
    for index, (name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            below = prefix != "dualmpi" and module.startswith(prefix + ".")
            if (module == prefix or below) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index, name)
    return None if best is None else best[1:]


def _modules():
    """Yield ``(module name, path)`` of every module of the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def _exists(module):
    """True when ``module`` names a module or package of the source tree."""
    rel = Path(*module.split("."))
    return (PACKAGE.parent / rel.with_suffix(".py")).exists() or (PACKAGE.parent / rel).is_dir()


def imports(module, path):
    """Return ``[(line, imported module)]`` of every ``dualmpi`` import in ``path``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names
                      if a.name.split(".")[0] == "dualmpi"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "dualmpi":
                continue
            for alias in node.names:  # ``from . import comm``: the submodule itself
                sub = f"{source}.{alias.name}"
                found.append((node.lineno, sub if _exists(sub) else source))
    return found


MODULES = dict(_modules())


def test_every_module_has_a_layer():
    missing = [m for m in MODULES if layer_of(m) is None]
    assert not missing, f"place these modules in tests/test_layers.py's LAYERS: {missing}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_from_a_layer_to_the_right(module):
    mine = layer_of(module)
    if mine is None:
        pytest.skip("not placed (test_every_module_has_a_layer fails)")
    bad = []
    for line, target in imports(module, MODULES[module]):
        theirs = layer_of(target)
        if theirs is not None and theirs[0] > mine[0]:
            bad.append(f"line {line}: {target} ({theirs[1]})")
    assert not bad, f"{module} ({mine[1]}) imports from a layer to its right: " + "; ".join(bad)


def test_the_check_sees_a_violation(tmp_path):
    """The parser resolves relative imports, inside functions too (the test can fail)."""
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from ..commands.run import main\n    from . import arrays\n")
    found = imports("dualmpi.engine.probe", path)
    assert found == [(2, "dualmpi.commands.run"), (3, "dualmpi.engine.arrays")]
    assert layer_of("dualmpi.commands.run")[0] > layer_of("dualmpi.engine.probe")[0]
    assert layer_of("dualmpi.engine.plan") == (4, "plan")
    assert layer_of("dualmpi.engine.mpi") == (5, "engine")
    assert layer_of("dualmpi") == (6, "public face") and layer_of("dualmpi.unplaced") is None
