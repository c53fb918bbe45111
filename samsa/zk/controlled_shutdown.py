"""A stopping broker's controlled shutdown: the controller moves its leaderships first.

Kafka's broker sends ControlledShutdown to the controller and retries while partitions remain
(``controlled.shutdown.max.retries``, ``controlled.shutdown.retry.backoff.ms``). Here the request
is an ephemeral znode the controller answers in (zk_client.py); a broker that is itself the
controller asks its own controller directly.
"""

from __future__ import annotations

import asyncio

from samsa.zk.controller import Controller, NotControllerError
from samsa.zk.membership import ClusterMembership

ANSWER_TIMEOUT_S = 10.0


async def ask_controlled_shutdown(broker_id: int, membership: ClusterMembership,
                                  controller: Controller | None) -> list[tuple[str, int]]:
    """The partitions this broker still leads after the controller moved what it could;
    TimeoutError when no controller answered."""
    if controller is not None and controller.active:
        try:
            return await asyncio.wrap_future(
                controller.call(controller.controlled_shutdown, broker_id))
        except NotControllerError:
            pass  # lost the controllership meanwhile: ask the new one
    zk = membership.zk
    loop = asyncio.get_running_loop()
    path = await loop.run_in_executor(None, zk.request_controlled_shutdown, broker_id)
    deadline = loop.time() + ANSWER_TIMEOUT_S
    while loop.time() < deadline:
        answer = await loop.run_in_executor(None, zk.controlled_shutdown_answer, path)
        if answer is not None:
            return answer
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no answer from the controller within {ANSWER_TIMEOUT_S:g} s")
