"""The console's pages without a browser: Starlette's TestClient over a real ClusterView against
a real broker (the ``console`` fixture). Status codes, error pages, confirmation steps, login."""

from __future__ import annotations

import http.cookiejar
import json
import re
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from starlette.testclient import TestClient
from waiting import wait_for

from samsa.console.app import create_app
from samsa.console.cluster_view import ClusterView
from samsa.console.login import read_login_file
from samsa.console.model import TopicSummary
from samsa.embedded import Broker
from samsa.tools.zookeeper_server import free_port

from .conftest import Console, UiProcess, make_console

pytestmark = pytest.mark.timeout(300)


def create_topic(broker: Broker, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(broker: Broker, topic: str, messages: list[tuple[bytes | None, bytes]],
            partition: int = 0, headers: list[tuple[str, bytes]] | None = None) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for key, value in messages:
        producer.produce(topic, value, key, partition=partition, headers=headers)
    assert producer.flush(30) == 0


def text(html: str) -> str:
    """The page's text, tags dropped and blanks collapsed (for asserting on sentences)."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def topics_page(console: Console, shown: str, **params: str) -> str:
    """The topics page once it lists ``shown``: it shows the history's last round, which
    catches up with topics made outside the console within its interval (1 s here)."""
    def page() -> str | None:
        answer = console.client.get("/topics", params=params)
        assert answer.status_code == 200
        return answer.text if f"/topics/{shown}" in answer.text else None
    return wait_for(page, 30, f"the topics page to list {shown}")


def test_pages_render_real_data(console: Console) -> None:
    create_topic(console.broker, "orders", 3)
    produce(console.broker, "orders", [(b"k1", b'{"id": 1}'), (b"k2", b"plain text")])
    c = console.client
    page = c.get("/")
    assert page.status_code == 200
    assert console.broker.bootstrap_servers.split(":")[1] in page.text  # the broker's port
    topics_page(console, "orders")
    topic = c.get("/topics/orders")
    assert topic.status_code == 200
    assert topic.text.count("<tr") >= 4  # the header and 3 partitions, then configs
    assert "retention.ms" in topic.text
    for path in ("/groups", "/transactions"):
        assert c.get(path).status_code == 200, path


def test_topics_search_filters_server_side(console: Console) -> None:
    create_topic(console.broker, "alpha-events")
    create_topic(console.broker, "beta-events")
    topics_page(console, "beta-events")
    page = topics_page(console, "alpha-events", q="ALPHA")
    assert "/topics/beta-events" not in page


def test_missing_topic_and_group_are_404_pages(console: Console) -> None:
    for path in ("/topics/no-such-topic", "/topics/no-such-topic/messages",
                 "/groups/no-such-group", "/no/such/page"):
        page = console.client.get(path)
        assert page.status_code == 404, path
        assert "Traceback" not in page.text
        assert 'class="error"' in page.text


def test_messages_page_formats_filter_and_bad_parameters(console: Console) -> None:
    create_topic(console.broker, "events")
    produce(console.broker, "events",
            [(b"a", b'{"user": "ada", "n": 1}'), (b"b", b'{"user": "bob", "n": 2}'),
             (None, b"\x00\xff\x10")], headers=[("trace", b"t-1")])
    c = console.client
    page = c.get("/topics/events/messages", params={"from": "beginning"})
    assert page.status_code == 200
    assert "&#34;user&#34;: &#34;ada&#34;" in page.text  # pretty JSON, escaped
    assert "trace" in page.text and "t-1" in page.text
    hex_page = c.get("/topics/events/messages", params={"from": "beginning", "format": "hex"})
    assert "00 ff 10" in hex_page.text or "00ff10" in hex_page.text
    found = c.get("/topics/events/messages", params={"from": "beginning", "filter": "bob"})
    assert found.status_code == 200
    assert "bob" in found.text and "ada" not in found.text
    one = c.get("/topics/events/messages", params={"from": "offset", "offset": "1",
                                                   "partition": "0", "limit": "1"})
    assert "bob" in one.text and "ada" not in one.text
    ts = c.get("/topics/events/messages", params={"from": "timestamp",
                                                  "timestamp": "2000-01-01T00:00:00Z"})
    assert ts.status_code == 200 and "ada" in ts.text
    for params in ({"from": "offset", "offset": "x"}, {"from": "sideways"},
                   {"format": "klingon"}, {"from": "timestamp", "timestamp": "yesterday"},
                   {"limit": "0"}):
        bad = c.get("/topics/events/messages", params=params)
        assert bad.status_code == 400, params
        assert 'class="error"' in bad.text and "Traceback" not in bad.text


def test_create_topic_confirms_first_then_creates(console: Console) -> None:
    c = console.client
    form = {"name": "created", "partitions": "2", "replication_factor": "1",
            "configs": "retention.ms=3600000"}
    confirm = c.post("/topics/create", data=form)
    assert confirm.status_code == 200
    assert "Create topic 'created' with 2 partition(s), replication factor 1." in \
        text(confirm.text)
    assert 'name="confirm" value="yes"' in confirm.text
    assert "created" not in [t.name for t in console.view.topics()]  # nothing changed yet
    done = c.post("/topics/create", data={**form, "confirm": "yes"})
    assert done.status_code == 303 and done.headers["location"].startswith("/topics/created")
    page = c.get(done.headers["location"])
    assert "Created topic created." in page.text
    detail = console.view.topic("created")
    assert len(detail.partitions) == 2
    assert {e.name: e.value for e in detail.configs}["retention.ms"] == "3600000"
    again = c.post("/topics/create", data={**form, "confirm": "yes"})
    assert again.status_code == 409 and "TOPIC_ALREADY_EXISTS" in again.text


def test_alter_configs_shows_kafkas_validation_error(console: Console) -> None:
    create_topic(console.broker, "conf")
    c = console.client
    confirm = c.post("/topics/conf/configs", data={"set": "retention.ms=60000"})
    assert confirm.status_code == 200 and "60000" in confirm.text
    done = c.post("/topics/conf/configs", data={"set": "retention.ms=60000", "confirm": "yes"})
    assert done.status_code == 303
    configs = {e.name: e.value for e in console.view.topic("conf").configs}
    assert configs["retention.ms"] == "60000"
    refused = c.post("/topics/conf/configs",
                     data={"set": "cleanup.policy=sideways", "confirm": "yes"})
    assert refused.status_code == 400
    assert "INVALID_CONFIG" in refused.text and 'id="config-error"' in refused.text
    assert "cleanup.policy=sideways" in refused.text  # the form keeps what was typed


def test_add_partitions_delete_records_and_delete_topic(console: Console) -> None:
    create_topic(console.broker, "grow")
    produce(console.broker, "grow", [(None, b"m%d" % i) for i in range(5)])
    c = console.client
    confirm = c.post("/topics/grow/partitions", data={"total": "3"})
    assert "Grow topic 'grow' from 1 to 3 partitions." in text(confirm.text)
    assert c.post("/topics/grow/partitions", data={"total": "1"}).status_code == 400
    assert c.post("/topics/grow/partitions",
                  data={"total": "3", "confirm": "yes"}).status_code == 303
    wait_for(lambda: len(console.view.topic("grow").partitions) == 3, 30, "3 partitions")

    confirm = c.post("/topics/grow/delete-records", data={"partition": "0", "offset": "3"})
    assert confirm.status_code == 200 and "records deleted" in confirm.text
    assert console.view.topic("grow").partitions[0].log_start == 0
    done = c.post("/topics/grow/delete-records",
                  data={"partition": "0", "offset": "3", "confirm": "yes"})
    assert done.status_code == 303
    assert console.view.topic("grow").partitions[0].log_start == 3

    confirm = c.post("/topics/grow/delete")
    assert "gone for good" in confirm.text
    assert c.post("/topics/grow/delete", data={"confirm": "yes"}).status_code == 303
    wait_for(lambda: c.get("/topics/grow").status_code == 404, 30, "the topic to be gone")


def test_produce_confirms_then_produces(console: Console) -> None:
    create_topic(console.broker, "produced")
    c = console.client
    form = {"partition": "0", "key": "k", "value": '{"hello": "world"}',
            "headers": "source=console\ntrace=42"}
    confirm = c.post("/topics/produced/produce", data=form)
    assert "Produce one message to topic 'produced', partition 0." in text(confirm.text)
    assert console.view.topic("produced").partitions[0].high_watermark == 0
    done = c.post("/topics/produced/produce", data={**form, "confirm": "yes"})
    assert done.status_code == 303
    page = c.get(done.headers["location"])
    assert "Produced to partition 0 at offset 0." in page.text
    assert "&#34;hello&#34;: &#34;world&#34;" in page.text and "console" in page.text
    assert c.post("/topics/produced/produce",
                  data={"headers": "no-equals-sign"}).status_code == 400


@pytest.fixture
def lagging_group(console: Console) -> Iterator[str]:
    """A group that consumed and committed 3 of 10 messages of topic 'work', then left."""
    create_topic(console.broker, "work")
    produce(console.broker, "work", [(None, b"w%d" % i) for i in range(10)])
    consumer = Consumer({"bootstrap.servers": console.broker.bootstrap_servers,
                         "group.id": "workers", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["work"])
        got: list[object] = []
        wait_for(lambda: got.extend(consumer.consume(3 - len(got), 1.0)) or len(got) >= 3,
                 30, "3 messages")
        consumer.commit(offsets=[TopicPartition("work", 0, 3)], asynchronous=False)
    finally:
        consumer.close()
    yield "workers"


def test_group_page_reset_dry_run_then_execute_and_delete(console: Console,
                                                          lagging_group: str) -> None:
    c = console.client
    wait_for(lambda: "7" in c.get("/groups/workers").text, 30, "the group's lag")
    page = c.get("/groups/workers")
    assert page.status_code == 200 and 'id="total-lag">7<' in page.text
    assert "workers" in c.get("/groups").text
    dry = c.post("/groups/workers/reset-offsets",
                 data={"topic": "work", "mode": "to-offset", "value": "8"})
    assert dry.status_code == 200 and "Dry run" in dry.text
    assert "<td>3</td><td>8</td>" in dry.text.replace("\n", "").replace(" ", "")
    assert console.view.group("workers").offsets[0].committed == 3  # dry run changed nothing
    done = c.post("/groups/workers/reset-offsets",
                  data={"topic": "work", "mode": "to-offset", "value": "8", "confirm": "yes"})
    assert done.status_code == 200
    assert console.view.group("workers").offsets[0].committed == 8
    bad = c.post("/groups/workers/reset-offsets", data={"mode": "to-offset"})
    assert bad.status_code == 400
    assert c.post("/groups/workers/delete").status_code == 200
    assert c.post("/groups/workers/delete", data={"confirm": "yes"}).status_code == 303
    wait_for(lambda: c.get("/groups/workers").status_code == 404, 30, "the group to be gone")


def test_reset_refused_while_the_group_has_members(console: Console, lagging_group: str) -> None:
    consumer = Consumer({"bootstrap.servers": console.broker.bootstrap_servers,
                         "group.id": lagging_group, "enable.auto.commit": False})
    try:
        consumer.subscribe(["work"])
        wait_for(lambda: consumer.poll(0.2) is None and bool(consumer.assignment()), 30,
                 "an assignment")
        refused = console.client.post(
            "/groups/workers/reset-offsets",
            data={"mode": "to-earliest", "confirm": "yes"})
        assert refused.status_code in (400, 409)
        assert 'class="error"' in refused.text and "Traceback" not in refused.text
        assert console.client.post("/groups/workers/delete",
                                   data={"confirm": "yes"}).status_code in (400, 409)
    finally:
        consumer.close()


def test_acls_without_an_authorizer_say_so(console: Console) -> None:
    page = console.client.get("/acls")
    assert page.status_code == 200
    assert "authorizer" in page.text.lower()


def test_series_and_tail_endpoints(console: Console) -> None:
    create_topic(console.broker, "tailed", 2)
    c = console.client
    console.history.sample()
    series = c.get("/api/series", params={"name": "messages_in"})
    assert series.status_code == 200 and series.json()["name"] == "messages_in"
    assert c.get("/api/series").status_code == 400
    first = c.get("/api/topics/tailed/tail").json()
    assert first["messages"] == [] and first["after"] == "0:0,1:0"
    produce(console.broker, "tailed", [(b"k", b"arrived")], partition=1)
    seen: list[dict[str, object]] = []
    after = first["after"]

    def poll() -> bool:
        nonlocal after
        body = c.get("/api/topics/tailed/tail", params={"after": after}).json()
        after = body["after"]
        seen.extend(body["messages"])
        return bool(seen)

    wait_for(poll, 30, "the tail to show the message")
    assert seen[0]["value"] == "arrived" and seen[0]["partition"] == 1
    assert after == "0:0,1:1"
    assert c.get("/api/topics/tailed/tail", params={"after": "x"}).status_code == 400
    assert c.get("/api/topics/gone/tail").status_code == 404


def test_broker_down_gives_an_error_page_not_a_hang(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    view = ClusterView(f"127.0.0.1:{port}", timeout_s=3.0)
    app = create_app(view, None, None, cluster_name=f"127.0.0.1:{port}")
    with TestClient(app, raise_server_exceptions=False) as client:
        started = time.monotonic()
        page = client.get("/topics")
        assert time.monotonic() - started < 30
        assert page.status_code in (502, 503)
        assert 'class="error"' in page.text and "Traceback" not in page.text
        assert client.get("/static/console.css").status_code == 200


def test_login_required_with_a_login_file(samsa_broker: Broker, tmp_path: Path) -> None:
    login = tmp_path / "users"
    login.write_text("# console users\nada:lovelace\n\nbob:b:with:colons\n")
    users = read_login_file(login)
    assert users == {"ada": "lovelace", "bob": "b:with:colons"}
    for console in make_console(samsa_broker, login=users):
        c = console.client
        page = c.get("/topics?q=x")
        assert page.status_code == 303
        assert page.headers["location"] == "/login?next=%2Ftopics%3Fq%3Dx"
        assert c.get("/static/console.css").status_code == 200
        assert c.get("/api/series", params={"name": "messages_in"}).status_code == 401
        assert c.post("/topics/create", data={"name": "x", "confirm": "yes"}).status_code == 303
        assert c.get("/login").status_code == 200
        wrong = c.post("/login", data={"username": "ada", "password": "nope", "next": "/"})
        assert wrong.status_code == 401 and "Wrong user name or password" in wrong.text
        ok = c.post("/login", data={"username": "ada", "password": "lovelace",
                                    "next": "/topics?q=x"})
        assert ok.status_code == 303 and ok.headers["location"] == "/topics?q=x"
        cookie = ok.headers["set-cookie"]
        assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
        assert c.get("/topics").status_code == 200
        # a redirect elsewhere after login is refused
        other = c.post("/login", data={"username": "ada", "password": "lovelace",
                                       "next": "//evil.example/"})
        assert other.headers["location"] == "/"
        assert c.post("/logout").status_code == 303
        assert c.get("/topics").status_code == 303


def test_bad_login_files_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("no-colon-here\n")
    with pytest.raises(ValueError, match="user:password"):
        read_login_file(bad)
    empty = tmp_path / "empty"
    empty.write_text("# nobody\n")
    with pytest.raises(ValueError, match="no user"):
        read_login_file(empty)


def test_topics_page_renders_1000_topics(console: Console) -> None:
    """1,000 topics (10,000 partitions) each get their row; how fast is bench/console_bench.py's
    to say (timings stay out of pass/fail tests)."""
    topics = [TopicSummary(f"topic-{i:04d}", False, 10, 3, 0, 0, 1 << 20, 12345, None)
              for i in range(1000)]
    templates = console.client.app.state.console.templates  # type: ignore[attr-defined]
    template = templates.get_template("topics.html")
    context = {"title": "Topics", "topics": topics, "q": "", "rates": {}, "internal": True,
               "cluster": "x", "login": False, "user": None, "notice": None}
    html = template.render(context)
    assert html.count("/topics/topic-") == 1000
    assert "topic-0000" in html and "topic-0999" in html


def test_json_in_the_page_is_escaped(console: Console) -> None:
    create_topic(console.broker, "xss")
    produce(console.broker, "xss", [(b"<script>alert(1)</script>", b"<b>bold</b>")])
    page = console.client.get("/topics/xss/messages", params={"from": "beginning"})
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;b&gt;bold&lt;/b&gt;" in page.text
    body = console.client.get("/api/topics/xss/tail").json()
    assert json.dumps(body)


@pytest.mark.samsa_broker(security_protocol="SASL_SSL", users={"alice": "alice-secret"})
def test_samsa_ui_over_https_against_a_sasl_ssl_cluster(samsa_broker: Broker,
                                                        tmp_path: Path) -> None:
    """``samsa ui`` with --command-config (SASL_SSL client settings), serving HTTPS with the
    broker's throwaway CA's certificate, and a login."""
    tls = samsa_broker.tls
    assert tls is not None
    config = samsa_broker.client_config()
    properties = tmp_path / "client.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in config.items()
                                  if k != "bootstrap.servers"))
    create_topic_config = AdminClient(config)
    create_topic_config.create_topics([NewTopic("secured", 1, 1)])["secured"].result(30)
    users = tmp_path / "users"
    users.write_text("ada:lovelace\n")
    trust = ssl.create_default_context(cafile=str(tls.ca_file))
    ui = UiProcess(samsa_broker, tmp_path / "ui.log", "--command-config", str(properties),
                   "--certfile", str(tls.keystore_file), "--login-file", str(users),
                   https=trust)
    try:
        ui.wait_ready()
        status, body = ui.get("/topics")
        assert status == 200 and "Log in" in body  # the login form, after the redirect
        opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=trust),
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        data = urllib.parse.urlencode({"username": "ada", "password": "lovelace",
                                       "next": "/topics"}).encode()
        with opener.open(ui.url + "/login", data, timeout=30) as response:
            page = response.read().decode()
        assert "/topics/secured" in page
        with opener.open(ui.url + "/", timeout=30) as response:
            assert samsa_broker.bootstrap_servers in response.read().decode()
    finally:
        ui.stop()
    assert "Traceback" not in ui.log.read_text(), ui.log.read_text()


def test_samsa_ui_starts_before_the_broker_and_shows_the_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as held:
        # bound and never listening for the whole test: connections are refused, and no other
        # process (a broker of a test run beside this one) can take the port meanwhile
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]

        class Nowhere:  # what UiProcess reads of a broker: nothing listens at this address
            bootstrap_servers = f"127.0.0.1:{port}"
            metrics_url = None

        ui = UiProcess(Nowhere(), tmp_path / "ui.log")  # type: ignore[arg-type]
        try:
            ui.wait_ready()
            status, body = ui.get("/topics")
            assert status in (502, 503) and 'class="error"' in body, (status, body[-2000:])
            assert "cannot connect to any bootstrap server" in body
        finally:
            ui.stop()


def test_changes_from_another_site_are_refused(console: Console) -> None:
    c = console.client
    form = {"name": "csrf", "partitions": "1", "confirm": "yes"}
    refused = c.post("/topics/create", data=form, headers={"origin": "http://evil.example"})
    assert refused.status_code == 403 and "evil.example" in refused.text
    assert "csrf" not in [t.name for t in console.view.topics()]
    same = c.post("/topics/create", data=form, headers={"origin": "http://testserver"})
    assert same.status_code == 303


def test_avro_values_decoded_through_samsas_schema_registry(tmp_path: Path) -> None:
    """Values written by confluent-kafka's AvroSerializer (schema registered in samsa's own
    registry) are shown as their fields; without the registry, as undecodable bytes."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from samsa.console.formats import SchemaRegistry

    schema = json.dumps({"type": "record", "name": "PageView", "fields": [
        {"name": "member", "type": "long"}, {"name": "page", "type": "string"}]})
    with Broker(tmp_path / "data", schema_registry=True) as broker:
        assert broker.schema_registry_url is not None
        serialize = AvroSerializer(SchemaRegistryClient({"url": broker.schema_registry_url}),
                                   schema)
        context = SerializationContext("page-views", MessageField.VALUE)
        produce(broker, "page-views", [(b"m1", serialize({"member": 7, "page": "/jobs"}, context))])
        view = ClusterView(broker.bootstrap_servers, timeout_s=10.0)
        registry = SchemaRegistry(broker.schema_registry_url)
        app = create_app(view, None, registry, cluster_name=broker.bootstrap_servers)
        with TestClient(app, follow_redirects=False) as client:
            page = client.get("/topics/page-views/messages",
                              params={"partition": "0", "from": "beginning", "format": "auto"})
            assert page.status_code == 200
            shown = text(page.text)
            assert '"page": "/jobs"' in shown and '"member": 7' in shown and "avro" in shown
        bare = create_app(view, None, None, cluster_name=broker.bootstrap_servers)
        with TestClient(bare, follow_redirects=False) as client:
            page = client.get("/topics/page-views/messages",
                              params={"partition": "0", "from": "beginning", "format": "avro"})
            assert page.status_code == 200
            assert "no schema registry is configured" in text(page.text)
        view.close()
