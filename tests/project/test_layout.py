"""The layout's promises (README "Architecture"): public import paths keep
working, the API process never loads a tokenizer or the core, and product
modules stay small enough to read in one sitting."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("derender", "derender_queue", "worker", "api")


def test_documented_public_paths_import():
    from derender.cli import main
    from derender_queue.wire.client import DerenderClient, Result
    from derender_queue.wire.streaming import derender_stream, parse_sse

    assert callable(main) and callable(DerenderClient)
    assert callable(derender_stream) and callable(parse_sse) and Result.__name__ == "Result"


def test_no_module_only_re_exports_another():
    """One name per concept: no shim module whose body is imports and `__all__`."""
    def shim(tree: ast.Module) -> bool:
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # a docstring
                continue
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
                continue
            return False
        return True

    shims = [str(path.relative_to(ROOT)) for pkg in PRODUCT for path in (ROOT / pkg).rglob("*.py")
             if path.name != "__init__.py" and shim(ast.parse(path.read_text("utf-8")))]
    assert shims == []


@pytest.mark.parametrize("command", ["chat", "completion", "worker", "api", "run", "batch", "healthcheck"])
def test_console_script_has_each_documented_subcommand(command):
    script = shutil.which("derender", path=str(Path(sys.executable).parent))
    assert script, "the `derender` console script is installed beside the interpreter"
    out = subprocess.run([script, command, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage: derender " + command in out.stdout


def test_importing_the_api_loads_no_tokenizer_core_or_worker():
    code = ("import json, sys; import api.server; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tokenizers', 'worker', 'arq') or m.startswith('derender_queue.core'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_no_product_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py")
            if (n := len(p.read_text("utf-8").splitlines())) > 400}
    assert long == {}
