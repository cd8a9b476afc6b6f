"""One version everywhere: `vk_provider.__version__` is the only place it is written; the packaging,
the chart, every manifest's and chart's reference to vk-provider's image, the development cluster's
stand-in for the image and every command's `--version` say the same."""

from __future__ import annotations

import argparse
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from vk_devtools.devcluster import localnode
from vk_provider import __version__
from vk_provider.cli import build_offload_parser, build_parser, main, offload_main
from vk_providers.local.config import entrypoint_for

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parents[2]
IMAGE_LINE = re.compile(r"^\s*(?:-\s*)?image:\s*[\"']?([^\s\"'#]+)", re.MULTILINE)
OUR_REPOSITORY = "vk-provider"


def test_the_version_is_a_release_version_written_once() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__), "a release has no .devN, rcN or local part"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project
    assert "version" in project["dynamic"]
    dynamic = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"]
    assert dynamic["version"] == {"attr": "vk_provider.__version__"}
    devtools = tomllib.loads((ROOT / "devtools" / "pyproject.toml").read_text())["project"]
    assert devtools["version"] == __version__


def test_the_chart_is_of_this_version_and_defaults_its_image_to_it() -> None:
    chart = yaml.safe_load((ROOT / "charts" / "vk-provider" / "Chart.yaml").read_text())
    assert (str(chart["version"]), str(chart["appVersion"])) == (__version__, __version__)
    image = yaml.safe_load((ROOT / "charts" / "vk-provider" / "values.yaml").read_text())["image"]
    assert image["repository"] == OUR_REPOSITORY
    assert image["tag"] in ("", __version__)  # empty: the chart's appVersion
    assert image["digest"] == ""  # `make release` pins the digest in the packaged chart only


def image_references() -> Iterator[tuple[str, str]]:
    for folder in ("manifests", "charts"):
        for path in sorted((ROOT / folder).rglob("*.yaml")):
            for reference in IMAGE_LINE.findall(path.read_text()):
                yield str(path.relative_to(ROOT)), reference


def test_every_reference_to_vk_provider_s_image_names_this_version() -> None:
    ours = [(path, ref) for path, ref in image_references() if ref.split(":")[0] == OUR_REPOSITORY]
    assert len(ours) >= 3  # the node, the router and the controller at least: the scan finds them
    wrong = [(path, ref) for path, ref in ours if ref != f"{OUR_REPOSITORY}:{__version__}"]
    assert wrong == []


def test_the_dev_cluster_runs_this_version_s_image_by_tag_and_by_digest() -> None:
    assert f"{OUR_REPOSITORY}:{__version__}" == localnode.VK_PROVIDER_IMAGE
    entrypoints = {image: tuple(argv) for image, argv in localnode.IMAGE_ENTRYPOINTS.items()}
    by_tag = entrypoint_for(localnode.VK_PROVIDER_IMAGE, entrypoints)
    assert by_tag is not None
    assert by_tag[-2:] == ("-m", "vk_provider")
    assert entrypoint_for(f"{OUR_REPOSITORY}@sha256:{'1' * 64}", entrypoints) == by_tag  # a release's chart


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                yield from command_paths(subparser, (*prefix, name))


@pytest.mark.parametrize(
    ("program", "parser", "run"),
    [("vk-provider", build_parser(), main), ("kubectl-offload", build_offload_parser(), offload_main)],
)
def test_every_command_at_every_depth_answers_version(
    program: str, parser: argparse.ArgumentParser, run: object, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = list(command_paths(parser))
    assert ("dev", "release") in paths or program == "kubectl-offload"
    assert len(paths) > 10
    for path in paths:
        with pytest.raises(SystemExit) as exit_:
            run([*path, "--version"])  # type: ignore[operator]
        assert exit_.value.code == 0, path
        assert capsys.readouterr().out == f"{program} {__version__}\n", path
