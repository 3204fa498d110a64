"""A registry imports the modules that define its schemas on its first lookup
(nhwc_onnx.schemas.base.Registry), and a definition that fails is never half-used."""
from __future__ import annotations

import sys
import textwrap

import pytest

from nhwc_onnx.schemas.base import OpSchema, Registry

_DEFINES_ONE_OP = textwrap.dedent("""
    from nhwc_onnx.schemas.base import OpSchema
    from {home} import REGISTRY
    REGISTRY.register(OpSchema("Twice", "test", "doubles x", [], []))
""")


@pytest.fixture
def family(tmp_path, monkeypatch):
    """A registry whose ops a module on sys.path defines (written by the test)."""
    home = f"registry_home_{id(tmp_path)}"
    module = f"registry_family_{id(tmp_path)}"
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry("test", defined_in=(module,))
    home_module = type(sys)(home)
    home_module.REGISTRY = registry
    monkeypatch.setitem(sys.modules, home, home_module)
    yield registry, module, tmp_path / f"{module}.py", home
    sys.modules.pop(module, None)


def test_the_defining_module_loads_on_the_first_lookup(family):
    registry, module, path, home = family
    path.write_text(_DEFINES_ONE_OP.format(home=home))
    registry.register(OpSchema("Direct", "test", "registered without the module", [], []))
    assert module not in sys.modules
    assert "Twice" in registry
    assert module in sys.modules
    assert registry.names() == ["Direct", "Twice"]
    assert registry["Twice"].doc == "doubles x"


def test_a_failing_definition_fails_every_lookup(family):
    registry, _module, path, _home = family
    path.write_text("raise RuntimeError('broken family')\n")
    for lookup in (lambda: registry.get("Twice"), lambda: registry.names()):
        with pytest.raises(RuntimeError, match="broken family"):
            lookup()


def test_the_real_registries_define_every_op_on_lookup():
    from nhwc_onnx.schemas import CORE_OPS, DIALECT_OPS

    assert len(DIALECT_OPS.names()) == 37
    assert {"Conv", "BatchNormalization", "Resize"} <= set(CORE_OPS.names())
