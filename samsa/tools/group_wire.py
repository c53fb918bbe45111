"""What ``samsa groups`` asks the brokers itself, beside confluent-kafka's admin client: every
group with its type and exact state (ListGroups to each broker: the client has no names for
the consumer groups' states, Assigning and Reconciling), and the epochs and target
assignments of KIP-848's consumer groups (ConsumerGroupDescribe to the group's coordinator),
which kafka-consumer-groups prints and the client does not expose."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from samsa.errors import ErrorCode
from samsa.tools.common import ToolError
from samsa.tools.wire import TP, WirePool, build_entity, error_text

LIST_GROUPS, CONSUMER_GROUP_DESCRIBE = 16, 69
KIO_LIST_GROUPS = (0, 5)
KIO_CONSUMER_GROUP_DESCRIBE = (0, 1)


@dataclass(frozen=True)
class Listed:
    group_id: str
    type: str  # "classic" or "consumer"
    state: str  # Kafka's name: Stable, Empty, Assigning, ...
    protocol_type: str = "consumer"  # "" for a group that only holds committed offsets


@dataclass
class ConsumerMember:
    epoch: int
    assignment: list[TP]
    target: list[TP]


@dataclass
class ConsumerGroupDetail:
    """A consumer group as ConsumerGroupDescribe tells it."""

    state: str
    group_epoch: int
    assignment_epoch: int
    members: dict[str, ConsumerMember] = field(default_factory=dict)


def list_groups(pool: WirePool) -> list[Listed]:
    """Every group of the consumer protocol type (classic groups of consumers, or groups
    without a protocol type yet, and consumer groups), from every broker, by id."""
    found: dict[str, Listed] = {}
    for node in pool.brokers():
        wire = pool.node(node)
        version = wire.version(LIST_GROUPS, *KIO_LIST_GROUPS, "ListGroups")
        module = importlib.import_module(f"kio.schema.list_groups.v{version}.request")
        request = build_entity(module.ListGroupsRequest, states_filter=(), types_filter=())
        response = wire.request(LIST_GROUPS, version, request)
        if response.error_code != ErrorCode.none:
            raise ToolError(error_text(response.error_code))
        for g in response.groups:
            kind = getattr(g, "group_type", "") or "classic"
            if kind not in ("classic", "consumer") or g.protocol_type not in ("consumer", ""):
                continue
            found[g.group_id] = Listed(g.group_id, kind, getattr(g, "group_state", "") or
                                       "Unknown", g.protocol_type)
    return [found[g] for g in sorted(found)]


def describe_consumer_groups(pool: WirePool, group_ids: list[str]
                             ) -> dict[str, ConsumerGroupDetail]:
    """ConsumerGroupDescribe of each group at its coordinator; groups that are not consumer
    groups (or not found) are left out."""
    details: dict[str, ConsumerGroupDetail] = {}
    for group_id in group_ids:
        code, host, port = pool.bootstrap().find_coordinator(group_id)
        if code != ErrorCode.none:
            raise ToolError(error_text(code))
        wire = pool.connect(host, port)
        version = wire.version(CONSUMER_GROUP_DESCRIBE, *KIO_CONSUMER_GROUP_DESCRIBE,
                               "ConsumerGroupDescribe")
        module = importlib.import_module(
            f"kio.schema.consumer_group_describe.v{version}.request")
        request = module.ConsumerGroupDescribeRequest(group_ids=(group_id,),
                                                      include_authorized_operations=False)
        response = wire.request(CONSUMER_GROUP_DESCRIBE, version, request)
        for g in response.groups:
            if g.error_code == ErrorCode.group_id_not_found:
                continue
            if g.error_code != ErrorCode.none:
                raise ToolError(error_text(g.error_code))
            details[g.group_id] = ConsumerGroupDetail(
                g.group_state, g.group_epoch, g.assignment_epoch,
                {m.member_id: ConsumerMember(m.member_epoch, _partitions(m.assignment),
                                             _partitions(m.target_assignment))
                 for m in g.members})
    return details


def _partitions(assignment: Any) -> list[TP]:
    return sorted((tp.topic_name, p) for tp in assignment.topic_partitions
                  for p in tp.partitions)
