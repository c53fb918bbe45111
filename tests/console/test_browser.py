"""The console end to end: ``samsa ui`` (a subprocess) against a real broker, driven by headless
Chromium (Debian's, through Playwright's sync API). Every page, the create/produce/search/tail
flow, a real consumer group's lag rising and falling, an offset reset, deleting the topic, and
the login form."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright
from waiting import wait_for

from samsa.embedded import Broker

from .conftest import UiProcess

pytestmark = pytest.mark.timeout(600)

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"the console's browser tests need Debian's chromium at {CHROMIUM} "
                    "(make apt installs it)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def ui(samsa_broker: Broker, tmp_path: Path) -> Iterator[UiProcess]:
    process = UiProcess(samsa_broker, tmp_path / "ui.log")
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()
    assert "Traceback" not in process.log.read_text(), process.log.read_text()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    expect.set_options(timeout=TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def total_lag(page: Page) -> int:
    page.reload()
    return int(page.locator("#total-lag").inner_text())


def submit_and_confirm(page: Page, form: Locator, summary: str, button: str) -> None:
    """Submit an action's ``form``, check its confirmation page says ``summary``, and confirm
    with the page's ``button``."""
    form.locator("button").click()
    expect(page.locator("section.confirm")).to_contain_text(summary)
    page.get_by_role("button", name=button).click()


def consume(consumer: Consumer, count: int, what: str) -> None:
    """Read ``count`` messages more with ``consumer`` (not committed)."""
    got: list[object] = []
    wait_for(lambda: got.extend(m for m in consumer.consume(50, 0.5) if not m.error())
             or len(got) >= count, 60, what)


@pytest.mark.samsa_broker(prometheus_listener="http://127.0.0.1:0")
def test_console_end_to_end(ui: UiProcess, page: Page, samsa_broker: Broker) -> None:
    base = ui.url
    bootstrap = samsa_broker.bootstrap_servers

    # overview: the broker, and a live chart fed by the history sampler
    page.goto(base + "/")
    expect(page.locator("h1")).to_have_text("Overview")
    expect(page.locator("#brokers")).to_contain_text(bootstrap)
    expect(page.locator("canvas[data-series=messages_in]")).to_have_attribute(
        "data-points", re.compile(r"[1-9]\d*"))

    # create a topic through the form and its confirmation page
    page.goto(base + "/topics")
    form = page.locator("#create-topic")
    form.locator("input[name=name]").fill("e2e-orders")
    form.locator("input[name=partitions]").fill("2")
    submit_and_confirm(page, form, "Create topic 'e2e-orders' with 2 partition(s)",
                       "Create topic")
    expect(page.locator("h1")).to_contain_text("Topic e2e-orders")
    expect(page.locator(".notice")).to_have_text("Created topic e2e-orders.")
    expect(page.locator("#partitions tbody tr")).to_have_count(2)

    # the topics list filters as one types
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("unrelated-topic", 1, 1)])["unrelated-topic"].result(30)
    # the list is the sampler's last round: it catches up within its interval
    wait_for(lambda: page.goto(base + "/topics") is not None
             and page.locator("#topics tr[data-name=unrelated-topic]").count() == 1,
             60, "the topics page to list unrelated-topic")
    page.locator("#topic-search").fill("e2e-ord")
    expect(page.locator("#topics tr[data-name=unrelated-topic]")).to_be_hidden()
    expect(page.locator("#topics tr[data-name=e2e-orders]")).to_be_visible()

    # the live tail on the messages page, and a message produced from the topic page
    page.goto(base + "/topics/e2e-orders/messages")
    page.locator("#live-tail").check()
    expect(page.locator("#tail-status")).to_have_text("tailing…")
    producer_page = page.context.new_page()
    producer_page.goto(base + "/topics/e2e-orders")
    produce_form = producer_page.locator("#produce")
    produce_form.locator("input[name=partition]").fill("1")
    produce_form.locator("input[name=key]").fill("order-42")
    produce_form.locator("textarea[name=value]").fill('{"order": 42, "item": "needle-lamp"}')
    produce_form.locator("textarea[name=headers]").fill("source=e2e")
    submit_and_confirm(producer_page, produce_form,
                       "Produce one message to topic 'e2e-orders', partition 1.", "Produce")
    expect(producer_page.locator(".notice")).to_have_text(
        "Produced to partition 1 at offset 0.")
    expect(producer_page.locator("#messages")).to_contain_text("needle-lamp")
    producer_page.close()
    expect(page.locator("#tail-rows")).to_contain_text("needle-lamp")
    expect(page.locator("#tail-rows")).to_contain_text("order-42")

    # the search filter finds it among other messages
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        producer.produce("e2e-orders", b'{"order": %d, "item": "plain"}' % i, b"k%d" % i,
                         partition=i % 2)
    assert producer.flush(30) == 0
    page.goto(base + "/topics/e2e-orders/messages")
    browse = page.locator("#browse")
    browse.locator("select[name=from]").select_option("beginning")
    browse.locator("input[name=filter]").fill("needle")
    browse.locator("button").click()
    expect(page.locator("#messages tbody:not(#tail-rows) tr")).to_have_count(1)
    expect(page.locator("#messages")).to_contain_text("needle-lamp")
    expect(page.locator("#messages")).to_contain_text("source")

    # a real consumer group: lag rises as messages are produced, falls as they are consumed
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-group",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["e2e-orders"])
        consume(consumer, 21, "the group to read 21 messages")
        consumer.commit(asynchronous=False)
        page.goto(base + "/groups/e2e-group")
        expect(page.locator("#members tbody tr")).to_have_count(1)
        wait_for(lambda: total_lag(page) == 0, 60, "lag 0")
        for i in range(30):
            producer.produce("e2e-orders", b"more %d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        wait_for(lambda: total_lag(page) == 30, 60, "the lag to rise to 30")
        consume(consumer, 30, "the group to read 30 more")
        consumer.commit(asynchronous=False)
        wait_for(lambda: total_lag(page) == 0, 60, "the lag to fall to 0")
    finally:
        consumer.close()

    # reset its offsets: the dry run first, then execute
    page.goto(base + "/groups/e2e-group")
    expect(page.locator("#members tbody tr")).to_have_count(0)
    reset = page.locator("#reset-offsets")
    reset.locator("select[name=topic]").select_option("e2e-orders")
    reset.locator("select[name=mode]").select_option("to-earliest")
    reset.locator("button").click()
    expect(page.locator("section.confirm")).to_contain_text("Dry run")
    expect(page.locator("section.confirm tbody tr")).to_have_count(2)
    page.get_by_role("button", name="Execute reset").click()
    expect(page.locator(".notice")).to_contain_text("Reset the offsets of group 'e2e-group'")
    page.get_by_role("link", name="Back to the group").click()
    expect(page.locator("#total-lag")).to_have_text("51")

    # every page answers
    for path, heading in [("/", "Overview"), ("/topics", "Topics"),
                          ("/topics/e2e-orders", "Topic e2e-orders"),
                          ("/topics/e2e-orders/messages", "Messages of e2e-orders"),
                          ("/groups", "Consumer groups"), ("/groups/e2e-group", "Group e2e-group"),
                          ("/transactions", "Transactions"), ("/acls", "ACLs")]:
        response = page.goto(base + path)
        assert response is not None and response.status == 200, path
        expect(page.locator("h1")).to_have_text(heading)
    expect(page.locator("main")).to_contain_text("authorizer")  # /acls, no authorizer here

    # delete the topic
    page.goto(base + "/topics/e2e-orders")
    submit_and_confirm(page, page.locator("#delete-topic"), "gone for good", "Delete topic")
    expect(page.locator(".notice")).to_have_text("Deleted topic e2e-orders.")
    wait_for(lambda: page.goto(base + "/topics/e2e-orders").status == 404,  # type: ignore[union-attr]
             60, "the topic's page to be gone")
    expect(page.locator(".error")).to_be_visible()


def test_login_required_with_a_login_file(samsa_broker: Broker, tmp_path: Path,
                                          page: Page) -> None:
    users = tmp_path / "console-users"
    users.write_text("ada:lovelace\n")
    ui = UiProcess(samsa_broker, tmp_path / "ui.log", "--login-file", str(users))
    try:
        ui.wait_ready()
        page.goto(ui.url + "/groups")
        expect(page.locator("h1")).to_have_text("Log in")
        page.locator("input[name=username]").fill("ada")
        page.locator("input[name=password]").fill("wrong")
        page.get_by_role("button", name="Log in").click()
        expect(page.locator(".error")).to_have_text("Wrong user name or password.")
        page.locator("input[name=username]").fill("ada")
        page.locator("input[name=password]").fill("lovelace")
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("h1")).to_have_text("Consumer groups")
        cookies = page.context.cookies()
        assert [c["httpOnly"] for c in cookies] == [True]
        page.get_by_role("button", name="Log out").click()
        expect(page.locator("h1")).to_have_text("Log in")
    finally:
        ui.stop()
