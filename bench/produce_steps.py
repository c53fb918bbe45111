"""What each step of a one-message Produce costs the broker, in-process (no network).

bench/request_capacity.py measures the whole request under load (about 25 µs of broker CPU);
this takes the request apart inside one embedded broker: the steps one at a time, each timed
over ``--count`` calls, then ``KafkaServer.dispatch`` whole (decode, handler, encode). What the
network and the event loop add on top is request_capacity.py's figure minus ``dispatch``;
bench/asyncio_floor.py measures the loop alone.

    .venv/bin/python bench/produce_steps.py [--count 100000]

The steps marked "needed" are the ones a broker cannot skip for a Produce (decode the request,
check the batch as Kafka does, write it, answer); their sum against the issue's 8 µs aim says how
much room the rest leaves.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from crc32c import crc32c

import samsa
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import APIS
from samsa.protocol.client import ClientCodec
from samsa.protocol.codec import decode_request
from samsa.protocol.fast import encode_fast
from samsa.records.batch import CRC_START, HEADER_SIZE, read_header, records_problem

from request_capacity import TOPIC, produce_body


def per_call_us(fn: Callable[[], Any], count: int) -> float:
    for _ in range(min(count, 1000)):
        fn()
    started = time.perf_counter()
    for _ in range(count):
        fn()
    return (time.perf_counter() - started) / count * 1e6


async def per_call_async_us(fn: Callable[[], Any], count: int) -> float:
    for _ in range(min(count, 1000)):
        await fn()
    started = time.perf_counter()
    for _ in range(count):
        await fn()
    return (time.perf_counter() - started) / count * 1e6


async def measure(count: int) -> list[tuple[str, bool, float]]:
    async with samsa.Broker() as broker:
        server = broker.server
        loop = asyncio.get_running_loop()

        def create() -> None:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)

        await loop.run_in_executor(None, create)
        _, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        deadline = time.monotonic() + 10
        while not server.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        connection = next(iter(server.connections))
        frame = ClientCodec("steps").encode(0, 9, produce_body())[0][4:]
        request = decode_request(frame)
        batch = request.body.topic_data[0].partition_data[0].records
        view = memoryview(batch)
        partition, _ = server.replicas.leader_partition(TOPIC, 0)
        assert partition is not None
        api = APIS[0]
        ctx = RequestContext(server, request, connection)
        answer = await api.handle(ctx, request.body)
        assert answer is not None
        fd, path = tempfile.mkstemp(prefix="produce-steps-")
        try:
            rows = [
                ("decode the request (kio's reader and the guard)", True,
                 per_call_us(lambda: decode_request(frame), count)),
                ("batch header", True, per_call_us(lambda: read_header(view, 0), count)),
                ("batch CRC-32C", True, per_call_us(lambda: crc32c(view[CRC_START:]), count)),
                ("records walk (Kafka's record count check)", True,
                 per_call_us(lambda: records_problem(view[HEADER_SIZE:], 1), count)),
                ("writev of the stamped batch to a file", True,
                 per_call_us(lambda: os.writev(fd, [batch[:16], view[16:]]), count)),
                ("encode the response", True,
                 per_call_us(lambda: encode_fast(0, 9, 7, answer), count)),
                ("log append (validation, offsets, producer state, index, writev)", False,
                 per_call_us(lambda: partition.log.append(batch), count)),
                ("partition append (log append, high watermark, waking fetches)", False,
                 per_call_us(lambda: partition.append(batch), count)),
                ("produce handler (checks, append, result, metrics)", False,
                 await per_call_async_us(lambda: api.handle(ctx, request.body), count)),
                ("KafkaServer.dispatch (decode, handler, encode)", False,
                 await per_call_async_us(lambda: server.dispatch(frame, connection), count)),
            ]
        finally:
            os.close(fd)
            os.unlink(path)
            writer.close()
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="calls per step")
    args = parser.parse_args()
    rows = asyncio.run(measure(args.count))
    print("| step | needed | µs per call |\n|---|---|---:|")
    for name, needed, us in rows:
        print(f"| {name} | {'yes' if needed else ''} | {us:.2f} |")
    print(f"| sum of the needed steps | | {sum(us for _, n, us in rows if n):.2f} |")


if __name__ == "__main__":
    main()
