"""Service links: the kubelet's variables, for the right Services, in a stable order."""

from __future__ import annotations

from tests.unit.environment_fakes import (
    NAMESPACE,
    FakeReader,
    env_value,
    make_container,
    make_pod,
    make_port,
    make_service,
    resolve,
    resolve_variables,
)

API_SERVER = make_service("kubernetes", "10.96.0.1", make_port(443, "https"))
API_SERVER_VARIABLES = {
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "KUBERNETES_SERVICE_PORT_HTTPS": "443",
    "KUBERNETES_PORT": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
    "KUBERNETES_PORT_443_TCP_PORT": "443",
    "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
}


def reader_with(
    namespace_services: list[dict[str, object]], *, default: list[dict[str, object]] | None = None
) -> FakeReader:
    return FakeReader(
        services_by_namespace={
            NAMESPACE: namespace_services,
            "default": [API_SERVER] if default is None else default,
        }
    )


async def test_a_service_with_one_unnamed_port_gives_the_kubelets_variables_in_order() -> None:
    reader = reader_with([make_service("redis", "10.0.0.11", make_port(6379))], default=[])
    resolved = await resolve(make_pod(), reader=reader)
    assert resolved.variables == (
        ("REDIS_SERVICE_HOST", "10.0.0.11"),
        ("REDIS_SERVICE_PORT", "6379"),
        ("REDIS_PORT", "tcp://10.0.0.11:6379"),
        ("REDIS_PORT_6379_TCP", "tcp://10.0.0.11:6379"),
        ("REDIS_PORT_6379_TCP_PROTO", "tcp"),
        ("REDIS_PORT_6379_TCP_PORT", "6379"),
        ("REDIS_PORT_6379_TCP_ADDR", "10.0.0.11"),
    )
    assert resolved.events == ()


async def test_named_ports_get_their_own_service_port_variables_and_every_port_gets_link_variables() -> None:
    service = make_service("my-db", "10.0.0.5", make_port(5432), make_port(9187, "metrics-http", "UDP"))
    variables = await resolve_variables(make_pod(), reader=reader_with([service], default=[]))
    assert variables == {
        "MY_DB_SERVICE_HOST": "10.0.0.5",
        "MY_DB_SERVICE_PORT": "5432",
        "MY_DB_SERVICE_PORT_METRICS_HTTP": "9187",
        "MY_DB_PORT": "tcp://10.0.0.5:5432",
        "MY_DB_PORT_5432_TCP": "tcp://10.0.0.5:5432",
        "MY_DB_PORT_5432_TCP_PROTO": "tcp",
        "MY_DB_PORT_5432_TCP_PORT": "5432",
        "MY_DB_PORT_5432_TCP_ADDR": "10.0.0.5",
        "MY_DB_PORT_9187_UDP": "udp://10.0.0.5:9187",
        "MY_DB_PORT_9187_UDP_PROTO": "udp",
        "MY_DB_PORT_9187_UDP_PORT": "9187",
        "MY_DB_PORT_9187_UDP_ADDR": "10.0.0.5",
    }


async def test_the_first_port_gives_service_port_even_when_it_is_named() -> None:
    service = make_service("web", "10.0.0.7", make_port(80, "http"), make_port(443, "https"))
    variables = await resolve_variables(make_pod(), reader=reader_with([service], default=[]))
    assert variables["WEB_SERVICE_PORT"] == "80"
    assert variables["WEB_SERVICE_PORT_HTTP"] == "80"
    assert variables["WEB_SERVICE_PORT_HTTPS"] == "443"
    assert variables["WEB_PORT"] == "tcp://10.0.0.7:80"


async def test_headless_and_external_name_services_give_no_variables() -> None:
    headless = make_service("headless", "None", make_port(80))
    external = make_service("external", "", make_port(80))
    external["spec"]["type"] = "ExternalName"
    assert await resolve_variables(make_pod(), reader=reader_with([headless, external], default=[])) == {}


async def test_an_ipv6_cluster_ip_is_bracketed_in_urls_but_not_in_addresses() -> None:
    service = make_service("v6", "fd00::10", make_port(8080))
    variables = await resolve_variables(make_pod(), reader=reader_with([service], default=[]))
    assert variables["V6_PORT"] == "tcp://[fd00::10]:8080"
    assert variables["V6_PORT_8080_TCP_ADDR"] == "fd00::10"
    assert variables["V6_SERVICE_HOST"] == "fd00::10"


async def test_services_come_in_name_order_whatever_order_the_reader_gives() -> None:
    services = [make_service(name, f"10.0.0.{index}", make_port(80)) for index, name in enumerate("cab", 1)]
    resolved = await resolve(make_pod(), reader=reader_with(services, default=[]))
    hosts = [name for name, _ in resolved.variables if name.endswith("_SERVICE_HOST")]
    assert hosts == ["A_SERVICE_HOST", "B_SERVICE_HOST", "C_SERVICE_HOST"]


async def test_the_api_server_service_is_linked_into_every_namespace() -> None:
    variables = await resolve_variables(make_pod(), reader=reader_with([]))
    assert variables == API_SERVER_VARIABLES


async def test_the_api_server_service_is_linked_even_when_service_links_are_disabled() -> None:
    reader = reader_with([make_service("redis", "10.0.0.11", make_port(6379))])
    variables = await resolve_variables(make_pod(enableServiceLinks=False), reader=reader)
    assert variables == API_SERVER_VARIABLES
    assert ("services", NAMESPACE, "") not in reader.reads


async def test_service_links_are_on_when_enable_service_links_is_absent_or_true() -> None:
    reader = reader_with([make_service("redis", "10.0.0.11", make_port(6379))], default=[])
    assert "REDIS_SERVICE_HOST" in await resolve_variables(make_pod(), reader=reader)
    assert "REDIS_SERVICE_HOST" in await resolve_variables(make_pod(enableServiceLinks=True), reader=reader)


async def test_only_the_kubernetes_service_of_the_default_namespace_reaches_other_namespaces() -> None:
    other = make_service("dashboard", "10.96.0.50", make_port(80))
    variables = await resolve_variables(make_pod(), reader=reader_with([], default=[API_SERVER, other]))
    assert "DASHBOARD_SERVICE_HOST" not in variables
    assert variables["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"


async def test_a_pod_in_the_default_namespace_gets_all_its_services_from_a_single_read() -> None:
    other = make_service("dashboard", "10.96.0.50", make_port(80))
    reader = FakeReader(services_by_namespace={"default": [other, API_SERVER]})
    variables = await resolve_variables(make_pod(namespace="default"), reader=reader)
    assert variables["DASHBOARD_SERVICE_HOST"] == "10.96.0.50"
    assert variables["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert reader.reads == [("services", "default", "")]


async def test_a_service_called_kubernetes_in_the_pods_namespace_wins_over_the_api_server() -> None:
    own = make_service("kubernetes", "10.0.0.99", make_port(8443))
    variables = await resolve_variables(make_pod(), reader=reader_with([own]))
    assert variables["KUBERNETES_SERVICE_HOST"] == "10.0.0.99"
    assert variables["KUBERNETES_SERVICE_PORT"] == "8443"
    assert "KUBERNETES_SERVICE_PORT_HTTPS" not in variables


async def test_a_headless_service_called_kubernetes_does_not_hide_the_api_server() -> None:
    own = make_service("kubernetes", "None", make_port(8443))
    variables = await resolve_variables(make_pod(), reader=reader_with([own]))
    assert variables["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"


async def test_with_links_disabled_a_service_called_kubernetes_in_the_pods_namespace_is_ignored() -> None:
    own = make_service("kubernetes", "10.0.0.99", make_port(8443))
    variables = await resolve_variables(make_pod(enableServiceLinks=False), reader=reader_with([own]))
    assert variables["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"


async def test_env_overrides_a_service_link_variable_and_can_refer_to_it() -> None:
    container = make_container(
        env=[
            env_value("KUBERNETES_SERVICE_HOST", "api.local"),
            env_value("URL", "https://$(KUBERNETES_PORT_443_TCP_ADDR)"),
        ]
    )
    resolved = await resolve(make_pod(container), reader=reader_with([]))
    variables = dict(resolved.variables)
    assert variables["KUBERNETES_SERVICE_HOST"] == "api.local"
    assert variables["URL"] == "https://10.96.0.1"
    assert resolved.variables[0] == ("KUBERNETES_SERVICE_HOST", "api.local")
