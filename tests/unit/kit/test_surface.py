"""The provider kit's public surface: what a provider may import from vk-provider, and nothing more.

A provider imports the contract (`vk_provider.provider`), `vk_provider.errors`, `vk_provider.plugins`,
`vk_provider.testing`, the kit (`vk_provider.kit.*`) and the plugin API (`vk_provider.plugin`: what the
`grpc` provider speaks and plugins serve); those modules import only each other, so a
provider never reaches the node, the router, the controller or the Kubernetes machinery through them.
No provider imports another, and vk-provider itself finds providers through entry points only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import vk_provider
import vk_providers

SURFACE = (
    "vk_provider.provider",
    "vk_provider.errors",
    "vk_provider.plugins",
    "vk_provider.testing",
    "vk_provider.kit",
    "vk_provider.plugin",
)
ROOT_NAMES = ("vk_provider.__version__",)
"""What the surface itself may take from the package's root."""
CORE = Path(vk_provider.__file__).parent
PROVIDERS = Path(vk_providers.__file__).parent


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every absolute import in the file; `from a import b` counts as `a.b` when `a`
    is vk_provider's root, where `b` may be a module."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == "vk_provider":
                for alias in node.names:
                    yield node.lineno, f"vk_provider.{alias.name}"
            else:
                yield node.lineno, node.module


def within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def violations(
    root: Path, allowed: tuple[str, ...], forbidden: tuple[str, ...], files: list[Path]
) -> list[str]:
    """`path:line imports module` (path from `root`) for each import of `forbidden` not in `allowed`."""
    return [
        f"{path.relative_to(root)}:{line} imports {module}"
        for path in files
        for line, module in imports(path)
        if within(module, forbidden) and not within(module, allowed)
    ]


def python_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def surface_files() -> list[Path]:
    files = [CORE / "provider.py", CORE / "errors.py", CORE / "plugins.py"]
    return files + python_files(CORE / "testing") + python_files(CORE / "kit")


def test_providers_import_only_the_contract_and_the_kit_of_vk_provider() -> None:
    assert violations(PROVIDERS.parent, SURFACE, ("vk_provider",), python_files(PROVIDERS)) == []


def test_the_kit_and_the_contract_import_only_each_other_of_vk_provider() -> None:
    assert violations(CORE.parent, SURFACE + ROOT_NAMES, ("vk_provider",), surface_files()) == []


def test_no_provider_imports_another() -> None:
    found = []
    for package in sorted(path for path in PROVIDERS.iterdir() if (path / "__init__.py").is_file()):
        own = f"vk_providers.{package.name}"
        found += violations(PROVIDERS.parent, (own,), ("vk_providers",), python_files(package))
    assert found == []


def test_vk_provider_imports_no_provider() -> None:
    assert violations(CORE.parent, (), ("vk_providers",), python_files(CORE)) == []


def test_the_checks_see_the_imports_they_judge(tmp_path: Path) -> None:
    source = tmp_path / "a" / "b" / "sample.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "import vk_provider.node.pods\n"
        "from vk_provider import plugins, cli\n"
        "from vk_provider.kit.kube import KubeApi\n"
        "from vk_providers.runpod import RunPodProvider\n"
        "def later():\n"
        "    from vk_provider._kube import events\n"
    )
    assert violations(tmp_path, SURFACE, ("vk_provider", "vk_providers"), [source]) == [
        "a/b/sample.py:1 imports vk_provider.node.pods",
        "a/b/sample.py:2 imports vk_provider.cli",
        "a/b/sample.py:4 imports vk_providers.runpod",
        "a/b/sample.py:6 imports vk_provider._kube",
    ]
