"""docs/reference/events.md is the Event and condition catalogue, and the catalogue names every reason
and condition type the code's Event and condition calls spell."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from vk_devtools.reference import events, pages
from vk_devtools.reference.sourcescan import UNKNOWN, Call, Code
from vk_provider.catalogue.events import CONDITIONS, EVENTS

PAGE = pages.page_of(events.MODULE)

EVENT_REASONS = {re.sub(r"<[^>]*>", UNKNOWN, event.reason) for event in EVENTS}
CONDITION_TYPES = {condition.type for condition in CONDITIONS}
CONDITION_REASONS = {reason.reason for condition in CONDITIONS for reason in condition.reasons}


@dataclasses.dataclass(frozen=True)
class Argument:
    """Where a call carries a reason or a condition type, and what the value names."""

    index: int | None = None
    keyword: str | None = None
    arity: int | None = None
    """The call's number of positional arguments, when the name alone is ambiguous."""


# What each call the code uses to post an Event or write a condition carries where. A reason that is
# both a condition's and an Event's (a problem reported on the object and in an Event) must be in both.
EVENT_CALLS = {
    "record": Argument(2, arity=4),  # EventRecorder.record(involved, type, reason, message)
    "_event": Argument(2),
    "_report_problem": Argument(3),
    "_report_lasting": Argument(keyword="reason"),
    "announce": Argument(0),
    "EnvironmentEvent": Argument(1),
    "Refusal": Argument(0),
    "Problem": Argument(0),
    "RouteProblem": Argument(0),
}
CONDITION_REASON_CALLS = {
    "condition": Argument(2, arity=4),
    "set_condition": Argument(3),
    "_waiting": Argument(1),
    "_report_problem": Argument(3),
    "Problem": Argument(0),
    "RouteProblem": Argument(0),
}
CONDITION_TYPE_CALLS = {"condition": Argument(0, arity=4), "set_condition": Argument(1)}

DYNAMIC_SITES = {
    "vk_provider/node/pods.py::_failed": "environment events, built by EnvironmentEvent (checked there)",
    "vk_provider/node/pods.py::_report_provider_failure": "ProviderCreateFailed or ProviderDeleteFailed",
    "vk_provider/node/pods.py::_admit": "the admission's Refusal reasons (checked there)",
    "vk_provider/node/pods.py::_request_for": "environment events, built by EnvironmentEvent",
    "vk_provider/node/daemon.py::post": "the providers' pod Events (NoCapacity, ProviderRefused), "
    "through ProviderContext.pod_events",
    "vk_provider/node/keeper.py::check_health_once": "ProviderUnavailable, or the provider's own reason "
    "(InsufficientBalance, QuotaExceeded)",
    "vk_provider/node/providerstart.py::build_provider": "reason_for(): CredentialsMissing or "
    "ProviderConfigError",
    "vk_provider/node/nodeobject.py::conditions": "the pressure conditions' types (PRESSURE_CONDITIONS); "
    "ServingCertificate's reasons (kubelet.certificates.state)",
    "vk_provider/environment/references.py::warn": "InvalidEnvironmentVariableNames (its callers)",
    "vk_provider/environment/references.py::missing": "Optional|Mandatory + ConfigMap|Secret + "
    "NotFound|KeyNotFound",
    "vk_provider/routetable/feed.py::_warn_once": "the five reasons of offload.names its callers pass",
    "vk_provider/controller/passes.py::condition": "Pass.condition: its callers' types and reasons",
    "vk_provider/controller/reconcilerbase.py::_report_problem": "its callers' reasons (checked there)",
    "vk_provider/controller/reconcilerbase.py::_event": "its callers' reasons (checked there)",
    "vk_provider/controller/reconcilerbase.py::_announcer": "AwayDeploymentCreated, through `announce`",
    "vk_provider/controller/reconciler.py::_decide": "the outcome reasons (the table in _decide)",
    "vk_provider/controller/reconciler.py::_finalize": "the outcome reasons; Migration + the outcome phase",
    "vk_provider/controller/intervals.py::_judge": "the gates' verdict (plan.Verdict values)",
    "vk_provider/controller/intervals.py::_act_on_severe": "the gates' verdict (plan.Verdict values)",
    "vk_provider/controller/deletion.py::_note_deleting": "MigratingHome or Blocked",
    "vk_provider/policy/controller.py::_report_lasting": "its callers' reasons (checked there)",
    "vk_provider/policy/controller.py::_carry_out": "EVENT_REASONS of the decision's action",
    "vk_provider/policy/controller.py::_flip": "EVENT_REASONS; FlipOutSkipped or FlipBackDeferred",
    "vk_provider/policy/controller.py::_taint": "EVENT_REASONS of the decision's action",
    "vk_provider/policy/controller.py::reconcile": "a Problem's reason; gpu_metrics_condition's",
    "vk_provider/policy/status.py::conditions_for": "a Problem's reason; gpu_metrics_condition's and "
    "pod_groups_condition's (status, reason, message)",
    "vk_provider/policy/admission/checks.py::_set_active": "resolve()'s reasons, InvalidPolicy",
    "vk_provider/policy/admission/checks.py::_write": "EVENT_REASONS by verdict, else AdmissionCheckRejected",
    "vk_provider/controller/reconciler.py::reconcile": "_missing()'s (reason, message)",
    "vk_provider/controller/reconciler.py::_waiting": "its callers' reasons (checked there)",
    "vk_provider/controller/reconciler.py::_wait_for_routers": "WaitingForRouters, or the wait's own "
    "(RouterUnreachable.waiting_reason: WaitingForEndpointPicker)",
}
"""The calls whose reason or type is not spelled at the call, by site, with where it comes from: each
value there is a reason of the catalogue too (the literals it is made of are checked below). A new
site fails the test until its reasons are catalogued and it is listed here."""


@pytest.fixture(scope="module")
def code() -> Code:
    return Code()


def test_the_committed_page_is_what_the_catalogue_says() -> None:
    assert pages.is_current(PAGE), PAGE.stale_line()


def _argument(call: Call, where: Argument) -> ast.expr | None:
    node = call.node
    if where.keyword is not None:
        return next((k.value for k in node.keywords if k.arg == where.keyword), None)
    assert where.index is not None
    if any(isinstance(arg, ast.Starred) for arg in node.args[: where.index + 1]):
        return ast.Name("<starred>")  # unknown: the values are spread from elsewhere
    if where.arity is not None and len(node.args) != where.arity and not _starred(node):
        return None
    return node.args[where.index] if where.index < len(node.args) else None


def _starred(node: ast.Call) -> bool:
    return any(isinstance(arg, ast.Starred) for arg in node.args)


def spelled(code: Code, calls: dict[str, Argument]) -> Iterator[tuple[str, Call]]:
    """(value, call) of every value the calls named in `calls` carry where `calls` says."""
    for call in code.calls():
        where = calls.get(call.name)
        if where is None:
            continue
        argument = _argument(call, where)
        if argument is not None:
            for text in code.alternatives(call.module, argument):
                yield text, call


def _unlisted(found: Iterator[tuple[str, Call]], catalogued: set[str]) -> dict[str, str]:
    missing = {}
    for text, call in found:
        if not text.replace(UNKNOWN, ""):  # nothing of it spelled at the call
            if call.site not in DYNAMIC_SITES:
                missing[f"(not spelled at the call) {call.name}(...)"] = call.site
        elif UNKNOWN in text:
            pattern = re.compile(".+".join(re.escape(part) for part in text.split(UNKNOWN)) + "$")
            if not any(pattern.match(entry) for entry in catalogued):
                missing[text] = call.site
        elif text not in catalogued:
            missing[text] = call.site
    return missing


def test_every_event_reason_the_code_spells_is_catalogued(code: Code) -> None:
    missing = _unlisted(spelled(code, EVENT_CALLS), EVENT_REASONS)
    assert not missing, (
        "Event reasons the code posts that vk_provider/catalogue/events.py does not list (add each with "
        f"what it means; a site whose reason comes from elsewhere goes in DYNAMIC_SITES): {missing}"
    )


def test_every_condition_type_and_reason_the_code_spells_is_catalogued(code: Code) -> None:
    missing = _unlisted(spelled(code, CONDITION_TYPE_CALLS), CONDITION_TYPES)
    missing |= _unlisted(spelled(code, CONDITION_REASON_CALLS), CONDITION_REASONS)
    assert not missing, f"condition types or reasons missing from vk_provider/catalogue/events.py: {missing}"


def test_every_dynamic_site_still_has_a_value_not_spelled_at_the_call(code: Code) -> None:
    found = [*spelled(code, EVENT_CALLS), *spelled(code, CONDITION_REASON_CALLS)]
    found += spelled(code, CONDITION_TYPE_CALLS)
    dynamic = {call.site for text, call in found if not text.replace(UNKNOWN, "")}
    assert set(DYNAMIC_SITES) <= dynamic, (
        f"DYNAMIC_SITES lists sites that need no entry: {set(DYNAMIC_SITES) - dynamic}"
    )


def _made_of(text: str, words: set[str]) -> bool:
    """Whether `text` is one of `words` or a concatenation of them (`ServingCertificate` + `Issued`)."""
    if text in words:
        return True
    return any(text.startswith(word) and _made_of(text[len(word) :], words) for word in words if word)


def test_every_catalogued_name_is_still_spelled_by_the_code(code: Code) -> None:
    # The literal parts of a composed string count as words: `KubeletHasNo` of f"KubeletHasNo{kind}".
    words = {part for found in code.strings() for part in found.text.split(UNKNOWN)}
    names = EVENT_REASONS | CONDITION_TYPES | CONDITION_REASONS
    stale = sorted(name for name in names if not _made_of(name, words - {""}))
    assert not stale, f"vk_provider/catalogue/events.py lists names the code no longer spells: {stale}"


def test_every_entry_is_complete_and_listed_once() -> None:
    assert len({(e.reason, e.on) for e in EVENTS}) == len(EVENTS)
    assert all(e.type in ("Normal", "Warning", "Warning or Normal") for e in EVENTS)
    assert len({(c.type, c.on) for c in CONDITIONS}) == len(CONDITIONS)
    for condition in CONDITIONS:
        assert condition.meaning
        assert condition.written_by
        assert all(r.status in ("True", "False", "Unknown") and r.meaning for r in condition.reasons)
        assert len({r.reason for r in condition.reasons}) == len(condition.reasons), condition.type


def test_the_scan_sees_reasons_passed_through_constants_and_conditionals(code: Code) -> None:
    found = {text for text, _ in spelled(code, EVENT_CALLS)}
    assert "TrafficKeyUnavailable" in found  # traffickey.KEY_UNAVAILABLE_REASON, imported
    assert "ProviderCreateSuccess" in found
    reasons = {text for text, _ in spelled(code, CONDITION_REASON_CALLS)}
    assert {"KubeletReady", "KubeletNotReady"} <= reasons  # one conditional expression


def test_every_reason_of_an_event_reasons_table_is_catalogued(code: Code) -> None:
    """The policy and the AdmissionCheck post the reasons of their `EVENT_REASONS` tables (by action,
    by verdict): sites in DYNAMIC_SITES, so the tables themselves are read."""
    tables = 0
    for module, (_, tree) in code.trees.items():
        for statement in tree.body:
            if (
                isinstance(statement, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "EVENT_REASONS" for t in statement.targets)
                and isinstance(statement.value, ast.Dict)
            ):
                tables += 1
                for value in statement.value.values:
                    assert code.evaluate(module, value) in EVENT_REASONS, (module, ast.unparse(value))
    assert tables >= 2


def test_a_new_reason_fails_the_check_until_catalogued(tmp_path: Path) -> None:
    package = tmp_path / "toy"
    package.mkdir()
    (package / "names.py").write_text('NEW_REASON = "BrandNewReason"\n')
    (package / "node.py").write_text(
        "from toy.names import NEW_REASON\n\n"
        "def post(events, involved, work):\n"
        '    events.record(involved, "Warning", NEW_REASON, "it happened")\n'
        '    events.record(involved, "Normal", "Killing", "catalogued already")\n'
        '    work.condition("Ready", "False", "UnheardOf", "no")\n'
    )
    toy = Code((package,))
    assert set(_unlisted(spelled(toy, EVENT_CALLS), EVENT_REASONS)) == {"BrandNewReason"}
    assert set(_unlisted(spelled(toy, CONDITION_REASON_CALLS), CONDITION_REASONS)) == {"UnheardOf"}
