"""Every daemon option from the environment too: `--log-level` is `VK_PROVIDER_LOG_LEVEL`.

The variable's name is the long flag in upper snake case behind `VK_PROVIDER_`, the rule the node's
settings follow (`vk_provider.node.settings`, which put its YAML file between the two). A variable that
is set becomes the option's default, so the command line still wins; its value is checked as the
flag's would be, and a bad one is a usage error naming the variable, exit 2.

The kubelet puts a variable `<SERVICE>_PORT=tcp://IP:PORT` in every container for each Service of its
namespace (service links): the Service `vk-provider-router` gives `VK_PROVIDER_ROUTER_PORT`, which is
also the controller's `--router-port`, and `vk-provider-envoy` the xDS server's `--envoy-port`. Such a
value is the Service's address, never a setting: it is skipped (`service_link`).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from typing import Any

ENV_PREFIX = "VK_PROVIDER_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")
_SERVICE_LINK = re.compile(r"^(tcp|udp|sctp)://[^/\s]+:[0-9]+$")


def service_link(name: str, value: str) -> bool:
    """Whether `name=value` is a Kubernetes service link variable (`<SERVICE>_PORT=tcp://IP:PORT`)."""
    return name.endswith("_PORT") and _SERVICE_LINK.match(value) is not None


def environment_variable(flag: str) -> str:
    """`--log-level` → `VK_PROVIDER_LOG_LEVEL`."""
    return ENV_PREFIX + flag.lstrip("-").replace("-", "_").upper()


def boolean(value: Any) -> bool:
    """true/false, yes/no, on/off, 1/0 in any case; ValueError otherwise."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{value!r} is not a boolean (true or false)")


def _long_flag(action: argparse.Action) -> str | None:
    return next((option for option in action.option_strings if option.startswith("--")), None)


def _converted(action: argparse.Action, text: str) -> Any:
    if action.nargs == 0:  # a switch: store_true, store_false, --x/--no-x
        switched = boolean(text)
        if isinstance(action, argparse._StoreFalseAction):
            return not switched
        if isinstance(action, argparse._StoreTrueAction | argparse.BooleanOptionalAction):
            return switched
        return action.const if switched else action.default
    convert = action.type if callable(action.type) else str
    if isinstance(action, argparse._AppendAction):
        return [_checked(action, convert(part.strip())) for part in text.split(",") if part.strip()]
    return _checked(action, convert(text))


def _checked(action: argparse.Action, value: Any) -> Any:
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"choose from {', '.join(map(str, action.choices))}")
    return value


def read_environment(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None) -> None:
    """Set the defaults of `parser`'s options from their `VK_PROVIDER_*` variables (hidden options,
    deprecated aliases among them, have none). A required option given by its variable is no longer
    required on the command line."""
    environ = os.environ if environ is None else environ
    for action in parser._actions:
        flag = _long_flag(action)
        if flag is None or action.help == argparse.SUPPRESS or action.dest in ("help", "version"):
            continue
        name = environment_variable(flag)
        if name not in environ or service_link(name, environ[name]):
            continue
        try:
            action.default = _converted(action, environ[name])
        except (ValueError, TypeError, argparse.ArgumentTypeError) as error:
            parser.error(f"environment variable {name}={environ[name]!r}: {error}")
        action.required = False
        for group in parser._mutually_exclusive_groups:
            if action in group._group_actions:
                group.required = False
