"""``samsa produce`` and ``samsa consume`` against an embedded broker (no consumer group)."""

from __future__ import annotations

import re
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.embedded import Broker

from . import _SCRIPT, error_line, ok, samsa, unique

KEYED = ["--property", "parse.key=true", "--property", "key.separator=:"]
ALL_FIELDS = [
    "--property", "print.timestamp=true", "--property", "print.partition=true",
    "--property", "print.offset=true", "--property", "print.key=true",
]
FULL_LINE = re.compile(
    r"^CreateTime:(?P<ts>\d+)\tPartition:(?P<partition>\d+)\tOffset:(?P<offset>\d+)"
    r"\t(?P<key>[^\t]*)\t(?P<value>.*)$"
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """Auto-created topics get one partition: records come back in the order produced."""
    with Broker(tmp_path_factory.mktemp("tools-console"), num_partitions=1) as b:
        yield b


@pytest.fixture(scope="module")
def broker3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with Broker(tmp_path_factory.mktemp("tools-console3"), num_partitions=3) as b:
        yield b


@pytest.fixture
def bs(broker: Broker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap_servers]


def consume_all(bs: list[str], topic: str, count: int, *args: str) -> list[str]:
    out = ok(samsa("consume", *bs, "--topic", topic, "--from-beginning",
                   "--max-messages", count, "--timeout-ms", 10_000, *args))
    return out.splitlines()


def test_lines_round_trip(bs: list[str]) -> None:
    topic = unique("lines")
    lines = ["first", "", "with spaces and\ttab", "ünïcödé ✓", "last"]
    result = samsa("produce", *bs, "--topic", topic, stdin="\n".join(lines) + "\n")
    assert ok(result) == "" and result.stderr == ""
    result = samsa("consume", *bs, "--topic", topic, "--from-beginning", "--max-messages",
                   len(lines), "--timeout-ms", 10_000)
    assert ok(result).split("\n")[:-1] == lines
    assert result.stderr == f"Processed a total of {len(lines)} messages\n"


def test_crlf_and_missing_final_newline(bs: list[str]) -> None:
    topic = unique("crlf")
    ok(samsa("produce", *bs, "--topic", topic, stdin=b"one\r\ntwo\nthree"))
    assert consume_all(bs, topic, 3) == ["one", "two", "three"]


def test_keys_and_printed_fields(bs: list[str]) -> None:
    topic = unique("keyed")
    before = int(time.time() * 1000)
    ok(samsa("produce", *bs, "--topic", topic, *KEYED, stdin="k1:v1\nk2:v:2\n:empty-key\n"))
    after = int(time.time() * 1000)
    lines = consume_all(bs, topic, 3, *ALL_FIELDS)
    fields = [FULL_LINE.match(line) for line in lines]
    assert all(fields), lines
    assert [(m["partition"], m["offset"], m["key"], m["value"]) for m in fields] == [
        ("0", "0", "k1", "v1"), ("0", "1", "k2", "v:2"), ("0", "2", "", "empty-key"),
    ]
    assert all(before - 1000 <= int(m["ts"]) <= after + 1000 for m in fields)

    # Kafka's column order, with a chosen separator; print.value=false leaves the keys only.
    lines = consume_all(bs, topic, 3, "--property", "print.key=true",
                        "--property", "print.offset=true", "--property", "key.separator=|")
    assert lines == ["Offset:0|k1|v1", "Offset:1|k2|v:2", "Offset:2||empty-key"]
    lines = consume_all(bs, topic, 3, "--property", "print.key=true",
                        "--property", "print.value=false")
    assert lines == ["k1", "k2", ""]
    # A record produced without parse.key has a null key.
    ok(samsa("produce", *bs, "--topic", topic, stdin="no-key\n"))
    assert consume_all(bs, topic, 4, "--property", "print.key=true")[3] == "null\tno-key"


def test_headers(bs: list[str]) -> None:
    topic = unique("headers")
    args = [
        *KEYED, "--property", "parse.headers=true", "--property", r"headers.delimiter=\t",
        "--property", "headers.separator=,", "--property", "headers.key.separator=:",
    ]
    stdin = "trace:abc,hop:1\tk1:v1\nsolo:x\tk2:v2\ndup:1,dup:2\tk3:v3\n"
    ok(samsa("produce", *bs, "--topic", topic, *args, stdin=stdin))
    ok(samsa("produce", *bs, "--topic", topic, stdin="plain\n"))
    lines = consume_all(bs, topic, 4, "--property", "print.headers=true",
                        "--property", "print.key=true")
    assert lines == [
        "trace:abc,hop:1\tk1\tv1",
        "solo:x\tk2\tv2",
        "dup:1,dup:2\tk3\tv3",
        "NO_HEADERS\tnull\tplain",
    ]
    lines = consume_all(bs, topic, 1, "--property", "print.headers=true",
                        "--property", "headers.separator=;",
                        "--property", "headers.key.separator==")
    assert lines == ["trace=abc;hop=1\tv1"]


def test_null_marker(bs: list[str]) -> None:
    topic = unique("nulls")
    ok(samsa("produce", *bs, "--topic", topic, *KEYED, "--property", "null.marker=<NULL>",
             "--property", "parse.headers=true", "--property", "headers.delimiter=|",
             stdin="h:<NULL>|<NULL>:value\nh:1|key:<NULL>\n<NULL>|k:v\n"))
    lines = consume_all(bs, topic, 3, "--property", "print.key=true",
                        "--property", "print.headers=true", "--property", "null.literal=NIL")
    assert lines == ["h:NIL\tNIL\tvalue", "h:1\tkey\tNIL", "NO_HEADERS\tk\tv"]


def test_bad_line_stops_after_sending_the_lines_before(bs: list[str]) -> None:
    topic = unique("badline")
    stdin = "a:1\nb:2\nno-separator\nc:3\n"
    line = error_line(samsa("produce", *bs, "--topic", topic, *KEYED, stdin=stdin))
    assert line == "samsa: No key separator found on line number 3: 'no-separator'"
    assert consume_all(bs, topic, 2) == ["1", "2"]
    out = ok(samsa("consume", *bs, "--topic", topic, "--offset", "2", "--partition", 0,
                   "--timeout-ms", 1500))
    assert out == ""

    # ignore.error=true: the whole line becomes the value, with a null key.
    ok(samsa("produce", *bs, "--topic", topic, *KEYED, "--property", "ignore.error=true",
             stdin=stdin))
    lines = ok(samsa("consume", *bs, "--topic", topic, "--partition", 0, "--offset", 2,
                     "--max-messages", 4, "--timeout-ms", 10_000,
                     "--property", "print.key=true")).splitlines()
    assert lines == ["a\t1", "b\t2", "null\tno-separator", "c\t3"]


def test_bad_header_reports_line(bs: list[str]) -> None:
    topic = unique("badheader")
    line = error_line(samsa("produce", *bs, "--topic", topic, "--property", "parse.headers=true",
                            stdin="h:1\tv1\nnocolon\tv2\n"))
    assert line == "samsa: No header key separator found in pair 'nocolon' on line number 2"
    line = error_line(samsa("produce", *bs, "--topic", topic, "--property", "parse.headers=true",
                            stdin="no delimiter here\n"))
    assert line == "samsa: No headers delimiter found on line number 1: 'no delimiter here'"


def test_binary_input_prints_replacement_characters(bs: list[str]) -> None:
    topic = unique("binary")
    ok(samsa("produce", *bs, "--topic", topic, stdin=b"\xff\xfeok\n"))
    assert consume_all(bs, topic, 1) == ["\ufffd\ufffdok"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression(broker: Broker, bs: list[str], codec: str) -> None:
    topic = unique(f"codec-{codec}")
    lines = [f"record {i} " + "z" * 50 for i in range(200)]
    ok(samsa("produce", *bs, "--topic", topic, "--compression-type", codec,
             stdin="\n".join(lines) + "\n"))
    assert consume_all(bs, topic, len(lines)) == lines
    segment = broker.data_dir / f"{topic}-0" / f"{0:020d}.log"
    dumped = ok(samsa("dump-log", segment))
    codecs = set(re.findall(r"compresscodec: (\w+)", dumped))
    assert codecs == {codec}, dumped


def test_compression_codec_alias(broker: Broker, bs: list[str]) -> None:
    topic = unique("codec-alias")
    # librdkafka sends a batch uncompressed when compression would not make it smaller.
    ok(samsa("produce", *bs, "--topic", topic, "--compression-codec", "gzip",
             stdin="a" * 1000 + "\n"))
    segment = broker.data_dir / f"{topic}-0" / f"{0:020d}.log"
    assert "compresscodec: gzip" in ok(samsa("dump-log", segment))


def test_many_lines(bs: list[str]) -> None:
    topic = unique("many")
    count = 5000
    ok(samsa("produce", *bs, "--topic", topic,
             stdin="".join(f"line-{i}\n" for i in range(count))))
    lines = consume_all(bs, topic, count)
    assert lines == [f"line-{i}" for i in range(count)]


def test_sync_acks_and_config_file(bs: list[str], tmp_path: Path) -> None:
    topic = unique("sync")
    ok(samsa("produce", *bs, "--topic", topic, "--sync", "--request-required-acks", "1",
             stdin="a\nb\n"))
    config = tmp_path / "producer.properties"
    config.write_text("# a comment\nlinger.ms=0\nacks=all\n")
    ok(samsa("produce", *bs, "--topic", topic, "--producer.config", config,
             "--producer-property", "batch.num.messages=10", stdin="c\n"))
    consumer_config = tmp_path / "consumer.properties"
    consumer_config.write_text("fetch.wait.max.ms=50\n")
    lines = consume_all(bs, topic, 3, "--consumer.config", str(consumer_config),
                        "--consumer-property", "fetch.min.bytes=1")
    assert lines == ["a", "b", "c"]


def test_delivery_failure(tmp_path: Path) -> None:
    with Broker(tmp_path / "data", message_max_bytes=500) as small:
        bs = ["--bootstrap-server", small.bootstrap_servers]
        topic = unique("toolarge")
        result = samsa("produce", *bs, "--topic", topic, "--sync",
                       stdin="small\n" + "x" * 5000 + "\n")
        line = error_line(result)
        assert "MESSAGE_TOO_LARGE" in line, line
        assert "1 record(s) not delivered" in line and "line 2" in line, line
        assert consume_all(bs, topic, 1) == ["small"]


def test_partitions_and_offsets(broker3: Broker) -> None:
    bs = ["--bootstrap-server", broker3.bootstrap_servers]
    topic = unique("spread")
    keys = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    stdin = "".join(f"{k}:{k}-{i}\n" for i in range(10) for k in keys)
    ok(samsa("produce", *bs, "--topic", topic, *KEYED, stdin=stdin))
    lines = consume_all(bs, topic, 60, *ALL_FIELDS)
    assert len(lines) == 60
    by_partition: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    partition_of: dict[str, set[int]] = defaultdict(set)
    for line in lines:
        m = FULL_LINE.match(line)
        assert m is not None, line
        by_partition[int(m["partition"])].append((int(m["offset"]), m["key"], m["value"]))
        partition_of[m["key"]].add(int(m["partition"]))
    assert all(len(parts) == 1 for parts in partition_of.values())
    assert set(by_partition) <= {0, 1, 2}
    for records in by_partition.values():
        records.sort()
        assert [offset for offset, _, _ in records] == list(range(len(records)))
        for key in {k for _, k, _ in records}:
            values = [v for _, k, v in records if k == key]
            assert values == [f"{key}-{i}" for i in range(10)]

    # One partition, from an offset in the middle.
    partition, records = max(by_partition.items(), key=lambda item: len(item[1]))
    out = ok(samsa("consume", *bs, "--topic", topic, "--partition", partition, "--offset", 3,
                   "--max-messages", 2, "--timeout-ms", 10_000))
    assert out.splitlines() == [records[3][2], records[4][2]]
    # --partition with --from-beginning: that partition only.
    out = ok(samsa("consume", *bs, "--topic", topic, "--partition", partition,
                   "--from-beginning", "--timeout-ms", 2000))
    assert out.splitlines() == [v for _, _, v in records]
    # An offset past the end starts at the end (auto.offset.reset latest).
    out = ok(samsa("consume", *bs, "--topic", topic, "--partition", partition,
                   "--offset", 10_000, "--timeout-ms", 1500))
    assert out == ""
    # --offset without --partition applies to every partition.
    out = ok(samsa("consume", *bs, "--topic", topic, "--offset", "earliest",
                   "--max-messages", 60, "--timeout-ms", 10_000))
    assert sorted(out.splitlines()) == sorted(v for r in by_partition.values() for _, _, v in r)


def test_latest_skips_existing_records(bs: list[str]) -> None:
    topic = unique("latest")
    ok(samsa("produce", *bs, "--topic", topic, stdin="old-1\nold-2\n"))
    result = samsa("consume", *bs, "--topic", topic, "--timeout-ms", 1500)
    assert ok(result) == ""
    assert result.stderr == "Processed a total of 0 messages\n"
    assert ok(samsa("consume", *bs, "--topic", topic, "--offset", "latest",
                    "--timeout-ms", 1500)) == ""

    # A consumer at the end sees what is produced after it started.
    consumer = subprocess.Popen(
        [str(_SCRIPT), "consume", *bs, "--topic", topic, "--max-messages", "1",
         "--timeout-ms", "30000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 40
        sent = 0
        while consumer.poll() is None and time.monotonic() < deadline:
            ok(samsa("produce", *bs, "--topic", topic, stdin=f"new-{sent}\n"))
            sent += 1
            time.sleep(0.3)
        out, err = consumer.communicate(timeout=30)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(10)
    assert consumer.returncode == 0, err
    assert re.fullmatch(rb"new-\d+\n", out), out


def test_max_messages_stops_early(bs: list[str]) -> None:
    topic = unique("max")
    ok(samsa("produce", *bs, "--topic", topic, stdin="".join(f"m{i}\n" for i in range(10))))
    assert consume_all(bs, topic, 3) == ["m0", "m1", "m2"]


def test_timeout_without_records_is_bounded(bs: list[str]) -> None:
    topic = unique("quiet")
    ok(samsa("produce", *bs, "--topic", topic, stdin="only\n"))
    started = time.monotonic()
    out = ok(samsa("consume", *bs, "--topic", topic, "--from-beginning", "--timeout-ms", 1000))
    assert out == "only\n"
    assert time.monotonic() - started < 15


def test_consume_missing_topic_or_partition(bs: list[str]) -> None:
    topic = unique("absent")
    line = error_line(samsa("consume", *bs, "--topic", topic, "--timeout-ms", 1000))
    assert line == f"samsa: UNKNOWN_TOPIC_OR_PARTITION: topic '{topic}' does not exist"
    ok(samsa("produce", *bs, "--topic", topic, stdin="x\n"))
    line = error_line(samsa("consume", *bs, "--topic", topic, "--partition", 7,
                            "--timeout-ms", 1000))
    assert line.startswith("samsa: UNKNOWN_TOPIC_OR_PARTITION"), line
    assert "no partition 7" in line


@pytest.mark.parametrize(
    "args",
    [
        ["produce"],
        ["produce", "--topic", "bad topic!"],
        ["produce", "--topic", "t", "--property", "parse.key=maybe"],
        ["produce", "--topic", "t", "--property", "no.such.property=1"],
        ["produce", "--topic", "t", "--property", "noequals"],
        ["produce", "--topic", "t", "--property", "key.separator="],
        ["produce", "--topic", "t", "--property", "null.marker=:", "--property",
         "key.separator=:"],
        ["produce", "--topic", "t", "--compression-type", "brotli"],
        ["produce", "--topic", "t", "--request-required-acks", "2"],
        ["produce", "--topic", "t", "--producer-property", "no.such.client.config=1"],
        ["produce", "--topic", "t", "--producer-property", "linger.ms=soon"],
        ["produce", "--topic", "t", "--producer.config", "/nonexistent/producer.properties"],
        ["consume"],
        ["consume", "--topic", "t", "--offset", "-1"],
        ["consume", "--topic", "t", "--offset", "middle"],
        ["consume", "--topic", "t", "--offset", "1", "--from-beginning"],
        ["consume", "--topic", "t", "--group", "g", "--partition", "0"],
        ["consume", "--topic", "t", "--partition", "-1"],
        ["consume", "--topic", "t", "--max-messages", "0"],
        ["consume", "--topic", "t", "--timeout-ms", "0"],
        ["consume", "--topic", "t", "--property", "print.keys=true"],
        ["consume", "--topic", "t", "--property", "print.key=yes"],
        ["consume", "--topic", "t", "--consumer-property", "no.such.client.config=1"],
        ["consume", "--topic", "t", "--max-messages", "ten"],
    ],
)
def test_usage_errors(bs: list[str], args: list[str]) -> None:
    result = samsa(args[0], *bs, *args[1:], stdin="x\n")
    error_line(result)
    assert result.stdout == ""
