"""Fetched regions large enough for sendfile (SENDFILE_MIN_BYTES): the connection sends what the
socket takes at once itself and the rest through the event loop's sendfile once the client
reads. Whatever the split, every byte arrives, in order with the responses around it."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from samsa.server.connection import SENDFILE_MIN_BYTES

from .conftest import FETCH, METADATA, decode_all, decode_response, encode_request, make_batch

pytestmark = pytest.mark.timeout(120)

# about 10.8 MB: more than loopback's socket buffers hold (tcp_wmem's and tcp_rmem's largest
# are 4 and 6 MiB by default), so each fetch's region goes out in parts
BATCHES = 12
RECORDS_PER_BATCH = 900  # of 1,000 bytes: each batch under the default max.message.bytes


def test_regions_larger_than_the_socket_takes_come_whole_and_in_order(raw):
    client = raw()
    client.create_topic("regions")
    values = []
    for b in range(BATCHES):
        batch_values = [bytes([65 + b]) * 990 + f"{i:010d}".encode()
                        for i in range(RECORDS_PER_BATCH)]
        values.extend(batch_values)
        assert client.produce("regions", make_batch(batch_values)).error_code == ErrorCode.none
    size = sum(len(v) for v in values)
    assert size > 100 * SENDFILE_MIN_BYTES

    # three requests sent before any answer is read
    reader = raw()
    fetch = client.fetch_body("regions", 0, max_bytes=16 << 20, partition_max_bytes=16 << 20)
    metadata = {"topics": [{"name": "regions"}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}
    reader.send_bytes(encode_request(FETCH, 11, fetch, 1) + encode_request(METADATA, 8, metadata, 2)
                      + encode_request(FETCH, 11, fetch, 3))

    for correlation in (1, 2, 3):
        key, version = (METADATA, 8) if correlation == 2 else (FETCH, 11)
        got, response = decode_response(key, version, reader.recv_frame(timeout=60))
        assert got == correlation
        if key == METADATA:
            assert [t.name for t in response.topics] == ["regions"]
            continue
        data = response.responses[0].partitions[0]
        assert data.error_code == ErrorCode.none
        assert [r.value for r in decode_all(data.records)] == values
