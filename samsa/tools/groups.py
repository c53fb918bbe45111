"""``samsa groups``: kafka-consumer-groups.sh (--list, --describe, --reset-offsets, --delete,
--delete-offsets), for classic groups and KIP-848's consumer groups.

Tables are Kafka's: the same columns, widths and order, each table after a blank line (trailing
padding is trimmed). Kafka's notices ("has no active members", "is rebalancing", the dry-run
warning) go to stderr; what Kafka reports as an error ("Consumer group 'g' does not exist.") is
one ``samsa:`` line and a non-zero exit here.

The groups' types and exact states (``--list``) and the epochs and target assignments of
consumer groups (``--describe --state/--members --verbose``) come from ListGroups and
ConsumerGroupDescribe, sent by ``group_wire.py``: confluent-kafka has no names for a consumer
group's Assigning and Reconciling states and does not expose its epochs.
confluent-kafka has no DeleteConsumerGroupOffsets, so ``--delete-offsets`` sends Kafka's
OffsetDelete request itself (FindCoordinator, then OffsetDelete to the coordinator, versions
negotiated with ApiVersions; over TLS and/or SASL as ``--command-config`` says: see
``samsa.tools.wire``).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaException,
    TopicPartition,
)
from confluent_kafka import KafkaError as ClientError
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConsumerGroupDescription, OffsetSpec

from samsa.errors import ErrorCode
from samsa.tools.admin import connect_admin
from samsa.tools.common import (
    REQUEST_TIMEOUT_S,
    ToolError,
    bootstrap_option,
    client_config,
    command_config_option,
    describe_error,
    handle_client_errors,
    read_properties_file,
)
from samsa.tools.group_wire import (
    ConsumerGroupDetail,
    Listed,
    describe_consumer_groups,
)
from samsa.tools.group_wire import list_groups as wire_list_groups
from samsa.tools.mirror_client import translate_offsets
from samsa.tools.wire import CLIENT_ID, TP, WirePool, WireSecurity, error_text, offset_delete

MISSING = "-"
ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
SCENARIOS = ("to_offset", "to_datetime", "by_duration", "to_earliest", "to_latest", "to_current",
             "shift_by", "to_checkpoint")
OPTION_NAMES = {
    "list": "--list", "describe": "--describe", "delete": "--delete",
    "reset_offsets": "--reset-offsets", "delete_offsets": "--delete-offsets",
    "groups": "--group", "all_groups": "--all-groups", "topics": "--topic",
    "all_topics": "--all-topics", "members": "--members", "offsets": "--offsets",
    "verbose": "--verbose", "state": "--state", "dry_run": "--dry-run", "execute": "--execute",
    "to_offset": "--to-offset", "to_datetime": "--to-datetime", "by_duration": "--by-duration",
    "to_earliest": "--to-earliest", "to_latest": "--to-latest", "to_current": "--to-current",
    "shift_by": "--shift-by", "timeout_ms": "--timeout", "type": "--type",
    "to_checkpoint": "--to-checkpoint",
}
# Which options each action accepts (beyond --bootstrap-server and --command-config).
ALLOWED: dict[str, set[str]] = {
    "list": {"state", "type", "timeout_ms"},
    "describe": {"groups", "all_groups", "members", "offsets", "verbose", "state", "timeout_ms"},
    "delete": {"groups", "all_groups", "timeout_ms"},
    "reset_offsets": {"groups", "all_groups", "topics", "all_topics", "dry_run", "execute",
                      "timeout_ms", *SCENARIOS},
    "delete_offsets": {"groups", "topics", "timeout_ms"},
}
# Kafka's GroupState names (what its tools print and --state takes) for the client's states.
STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
# Kafka's GroupState names of classic and consumer groups, in its order
LISTABLE_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty",
                   "Assigning", "Reconciling")
GROUP_TYPES = ("classic", "consumer")
DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major"
    " release, the default behavior of this command will be to prompt the user before executing"
    " the reset rather than doing a dry run. You should add the --dry-run option explicitly if"
    " you are scripting this command and want to keep the current default behavior without"
    " prompting."
)

_DATETIME = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})T(?P<time>\d{2}:\d{2}:\d{2})\.(?P<ms>\d{3})"
    r"(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?$"
)
# java.time.Duration.parse: [-+]PnDTnHnMn.nS, case-insensitive, each number may carry a sign.
_DURATION = re.compile(
    r"^(?P<sign>[-+]?)P(?:(?P<d>[-+]?\d+)D)?"
    r"(?P<t>T(?:(?P<h>[-+]?\d+)H)?(?:(?P<m>[-+]?\d+)M)?(?:(?P<s>[-+]?\d+)(?:[.,](?P<f>\d{0,9}))?S)?)?$",
    re.IGNORECASE,
)


# --- parsing -------------------------------------------------------------------------------------


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime (``Utils.getDateTime``): ``YYYY-MM-DDTHH:mm:SS.sss`` with an
    optional zone (``Z``, ``+hh``, ``+hhmm``, ``+hh:mm``; none means UTC) -> epoch ms."""
    if "T" not in text:
        raise click.UsageError(
            f"Error parsing timestamp {text!r}. It does not contain a 'T' according to ISO8601"
            " format"
        )
    match = _DATETIME.match(text)
    if match is None:
        raise click.UsageError(
            f"--to-datetime takes YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm], got {text!r}"
        )
    zone = match["zone"] or "Z"
    offset = dt.timedelta(0)
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:] or 0)
        if hours > 23 or minutes > 59:
            raise click.UsageError(f"--to-datetime: invalid zone offset in {text!r}")
        offset = dt.timedelta(hours=hours, minutes=minutes) * (-1 if zone[0] == "-" else 1)
    try:
        local = dt.datetime.strptime(f"{match['date']}T{match['time']}", "%Y-%m-%dT%H:%M:%S")
    except ValueError as exc:
        raise click.UsageError(f"--to-datetime: invalid date or time in {text!r}") from exc
    moment = local.replace(tzinfo=dt.timezone(offset))
    return int(moment.timestamp()) * 1000 + int(match["ms"])


def parse_duration(text: str) -> dt.timedelta:
    """Kafka's --by-duration (``java.time.Duration.parse``): ``PnDTnHnMn.nS``."""
    match = _DURATION.match(text)
    if (
        match is None
        or match["t"] is not None and not (match["h"] or match["m"] or match["s"])
        or not (match["d"] or match["h"] or match["m"] or match["s"])
    ):
        raise click.UsageError(f"--by-duration takes PnDTnHnMnS (ISO-8601), got {text!r}")
    seconds = int(match["s"] or 0)
    fraction = (match["f"] or "").ljust(9, "0")
    nanos = int(fraction) * (-1 if (match["s"] or "").startswith("-") else 1)
    duration = dt.timedelta(
        days=int(match["d"] or 0), hours=int(match["h"] or 0), minutes=int(match["m"] or 0),
        seconds=seconds, microseconds=nanos / 1000,
    )
    return -duration if match["sign"] == "-" else duration


def parse_topic_arg(arg: str) -> tuple[str, list[int] | None]:
    """``--topic`` as Kafka reads it: ``topic`` (all partitions) or ``topic:0,1,2``."""
    if ":" not in arg:
        if not arg:
            raise click.UsageError("--topic must not be empty")
        return arg, None
    parts = arg.split(":")
    # Java's split drops trailing empty strings: "t:" is a topic without partitions.
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise click.UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    partitions: list[int] = []
    for item in parts[1].split(","):
        try:
            partitions.append(int(item))
        except ValueError:
            raise click.UsageError(
                f"Invalid partition '{item}' specified in topic arg '{arg}'"
            ) from None
    return parts[0], partitions


def parse_states(value: str) -> set[str]:
    """``--list --state stable,empty``: Kafka's state names, case-insensitive."""
    by_upper = {name.upper(): name for name in LISTABLE_STATES}
    states = set()
    for item in value.split(","):
        name = by_upper.get(item.strip().upper())
        if name is None:
            raise click.UsageError(
                f"Invalid state list '{value}'. Valid states are: {', '.join(LISTABLE_STATES)}"
            )
        states.add(name)
    return states


def parse_types(value: str) -> set[str]:
    """``--list --type classic,consumer``: Kafka's group types, case-insensitive."""
    types = {item.strip().lower() for item in value.split(",")}
    if not types <= set(GROUP_TYPES):
        raise click.UsageError(
            f"Invalid types list '{value}'. Valid types are: {', '.join(GROUP_TYPES)}")
    return types


def clamp(offset: int, earliest: int | None, latest: int | None) -> int:
    """Kafka's checkOffsetsRange: above the log end offset -> it; below the log start -> it."""
    if latest is not None and offset > latest:
        return latest
    if earliest is not None and offset < earliest:
        return earliest
    return offset


def error_code(exc: KafkaException) -> int | None:
    """The Kafka error code a client exception carries, if any."""
    err = exc.args[0] if exc.args else None
    return err.code() if isinstance(err, ClientError) else None


def state_name(state: Any) -> str:
    return STATE_NAMES.get(state, "Unknown")


# --- output --------------------------------------------------------------------------------------


def format_line(values: Sequence[object], widths: Sequence[int]) -> str:
    """Java's ``"%-W1s %-W2s ... %s"``: every value but the last left-justified to its width."""
    cells = [str(v).ljust(w) for v, w in zip(values, widths, strict=False)]
    cells += [str(v) for v in values[len(widths):]]
    return " ".join(cells).rstrip()


def print_table(header: Sequence[str], rows: Iterable[Sequence[object]],
                widths: Sequence[int]) -> None:
    click.echo("")
    click.echo(format_line(header, widths))
    for row in rows:
        click.echo(format_line(row, widths))


def _width(values: Iterable[str], least: int = 15) -> int:
    return max([least, *(len(v) for v in values)])


def partition_name(topic: str, partition: int) -> str:
    """A TopicPartition as Kafka writes it: ``topic-0``."""
    return f"{topic}-{partition}"


def assignment_text(partitions: Iterable[tuple[str, int]]) -> str:
    """Kafka's --members --verbose CURRENT-ASSIGNMENT and TARGET-ASSIGNMENT: ``t1:0,1;t2:3``,
    or ``-``."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    if not by_topic:
        return MISSING
    return ";".join(
        sorted(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in by_topic.items())
    )


# --- the command ---------------------------------------------------------------------------------


@click.command("groups")
@bootstrap_option
@click.option("--list", "list_", is_flag=True, help="List the consumer groups.")
@click.option("--describe", is_flag=True,
              help="Describe groups: offsets and lag (default), --members or --state.")
@click.option("--delete", is_flag=True, help="Delete whole groups (they must be empty).")
@click.option("--reset-offsets", "reset_offsets", is_flag=True,
              help="Reset a group's committed offsets (the group must be inactive).")
@click.option("--delete-offsets", "delete_offsets", is_flag=True,
              help="Delete a group's committed offsets of some topics or partitions.")
@click.option("--group", "groups", multiple=True, help="The group to act on; repeatable.")
@click.option("--all-groups", "all_groups", is_flag=True, help="Act on every group.")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P...]",
              help="A topic, or some of its partitions, for --reset-offsets / --delete-offsets.")
@click.option("--all-topics", "all_topics", is_flag=True,
              help="With --reset-offsets: every partition the group has an offset for.")
@click.option("--members", is_flag=True, help="With --describe: the group's members.")
@click.option("--offsets", is_flag=True,
              help="With --describe: offsets and lag per partition (the default).")
@click.option("--verbose", is_flag=True,
              help="With --describe: more columns (leader epochs, assignments).")
@click.option("--state", "state", is_flag=False, flag_value="", default=None,
              metavar="[STATE,...]",
              help="With --describe: the group's state. With --list: each group's state, "
                   "or only groups in these states.")
@click.option("--type", "type", is_flag=False, flag_value="", default=None,
              metavar="[TYPE,...]",
              help="With --list: each group's type (classic, consumer), or only groups of "
                   "these types.")
@click.option("--dry-run", "dry_run", is_flag=True,
              help="With --reset-offsets: only print the new offsets (the default).")
@click.option("--execute", is_flag=True, help="With --reset-offsets: commit the new offsets.")
@click.option("--to-earliest", "to_earliest", is_flag=True, help="Reset to the log start.")
@click.option("--to-latest", "to_latest", is_flag=True, help="Reset to the log end.")
@click.option("--to-current", "to_current", is_flag=True,
              help="Reset to the committed offset (the log end where there is none).")
@click.option("--to-offset", "to_offset", type=int, help="Reset to this offset (clamped).")
@click.option("--shift-by", "shift_by", type=int,
              help="Move the committed offsets by N (negative: back), clamped to the log.")
@click.option("--to-datetime", "to_datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
              help="Reset to the first offset at or after this time (zone: Z, +hh:mm; UTC).")
@click.option("--by-duration", "by_duration", metavar="PnDTnHnMnS",
              help="Reset to the first offset at or after now minus this duration.")
@click.option("--to-checkpoint", "to_checkpoint", metavar="ALIAS",
              help="Reset to the group's offsets in cluster ALIAS translated for this cluster: "
                   "the checkpoints MirrorMaker 2 (samsa mirror) wrote to "
                   "ALIAS.checkpoints.internal here (RemoteClusterUtils.translateOffsets).")
@click.option("--timeout", "timeout_ms", type=click.IntRange(min=1),
              help=f"Admin request timeout in ms (default {int(REQUEST_TIMEOUT_S * 1000)}).")
@command_config_option
@handle_client_errors
def groups(
    bootstrap_server: str, list_: bool, describe: bool, delete: bool, reset_offsets: bool,
    delete_offsets: bool, command_config: Path | None, **options: Any,
) -> None:
    """List, describe, reset, delete consumer groups, as kafka-consumer-groups.sh does."""
    flags = {"list": list_, "describe": describe, "delete": delete,
             "reset_offsets": reset_offsets, "delete_offsets": delete_offsets}
    chosen = [name for name in ACTIONS if flags[name]]
    if len(chosen) != 1:
        raise click.UsageError(
            "Command must include exactly one action: --list, --describe, --delete,"
            " --reset-offsets, --delete-offsets"
        )
    action = chosen[0]
    for name, value in options.items():
        if value not in (None, False, ()) and name not in ALLOWED[action]:
            if action == "delete" and name == "topics":
                raise click.UsageError(
                    "The consumer does not support topic-specific offset deletion from a"
                    " consumer group."
                )
            raise click.UsageError(
                f"option {OPTION_NAMES[name]} can't be used with {OPTION_NAMES[action]}"
            )
    _check_groups(action, options)
    timeout = (options["timeout_ms"] or REQUEST_TIMEOUT_S * 1000) / 1000
    plan: ResetPlan | None = None
    if action == "reset_offsets":
        plan = ResetPlan.from_options(options)
    states: set[str] = set()
    if action == "list" and options["state"]:
        states = parse_states(options["state"])
    types: set[str] = set()
    if action == "list" and options["type"]:
        types = parse_types(options["type"])
    if action == "describe":
        chosen_views = [n for n in ("members", "offsets") if options[n]]
        if options["state"] is not None:
            chosen_views.append("state")
        if len(chosen_views) > 1:
            raise click.UsageError(
                "Option --describe takes at most one of these options: --members, --offsets,"
                " --state"
            )
        if options["state"]:
            raise click.UsageError("Option --describe does not take a value for --state")
    extra = read_properties_file(command_config, "--command-config")

    admin, metadata = connect_admin(bootstrap_server, CLIENT_ID, extra)
    try:
        security: WireSecurity | None = WireSecurity.from_properties(extra, "--command-config")
    except ToolError:  # settings only the client can honour: it answers on its own
        security = None
    tool = GroupTool(admin, metadata, timeout, None if security is None else
                     lambda: WirePool(bootstrap_server, timeout, CLIENT_ID, security))
    tool.consumer_config = client_config(bootstrap_server, CLIENT_ID, extra)
    group_ids = list(dict.fromkeys(options["groups"]))
    if options["all_groups"]:
        group_ids = [g.group_id for g in tool.list_groups()]
    if action == "list":
        tool.print_list(states, options["state"] is not None, types, options["type"] is not None)
    elif action == "describe":
        tool.describe(group_ids, options)
    elif action == "delete":
        tool.delete(group_ids)
    elif action == "reset_offsets":
        assert plan is not None
        tool.reset(group_ids, plan)
    else:
        delete_group_offsets(
            bootstrap_server, extra, tool, group_ids[0], options["topics"], timeout
        )
    for note in tool.notes:
        click.echo(note, err=True)


def _check_groups(action: str, options: dict[str, Any]) -> None:
    """Kafka's argument rules about --group / --all-groups / --topic per action."""
    if options["groups"] and options["all_groups"]:
        raise click.UsageError("option --group can't be used with --all-groups")
    if action in ("describe", "delete", "reset_offsets") and not (
        options["groups"] or options["all_groups"]
    ):
        raise click.UsageError(
            f"Option {OPTION_NAMES[action]} takes one of these options: --all-groups, --group"
        )
    if action == "delete_offsets":
        if not options["groups"] or not options["topics"]:
            raise click.UsageError(
                "Option --delete-offsets takes the following options: --group, --topic"
            )
        if len(set(options["groups"])) > 1:
            raise click.UsageError("Option --delete-offsets takes exactly one --group")
        for topic in options["topics"]:
            parse_topic_arg(topic)


# --- reset plans ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResetPlan:
    """What --reset-offsets was asked to do, checked before anything is sent."""

    scenario: str
    topics: tuple[tuple[str, list[int] | None], ...]
    all_topics: bool
    execute: bool
    warn_dry_run: bool  # neither --dry-run nor --execute: Kafka warns
    offset: int = 0  # --to-offset / --shift-by
    timestamp: int | None = None  # --to-datetime / --by-duration: epoch ms
    checkpoint_alias: str | None = None  # --to-checkpoint

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ResetPlan:
        given = [name for name in SCENARIOS if options[name] not in (None, False)]
        if not given:
            raise click.UsageError(
                "Option --reset-offsets requires one of the following scenarios: "
                + ", ".join(OPTION_NAMES[s] for s in SCENARIOS)
            )
        if len(given) > 1:
            raise click.UsageError(
                f"option {OPTION_NAMES[given[0]]} can't be used with {OPTION_NAMES[given[1]]}"
            )
        if options["dry_run"] and options["execute"]:
            raise click.UsageError(
                "Option --reset-offsets only accepts one of --execute and --dry-run"
            )
        if not options["topics"] and not options["all_topics"]:
            raise click.UsageError(
                "One of the reset scopes should be defined: --all-topics, --topic."
            )
        if options["topics"] and options["all_topics"]:
            raise click.UsageError("option --topic can't be used with --all-topics")
        scenario = given[0]
        return cls.of(
            scenario, options[scenario], tuple(parse_topic_arg(t) for t in options["topics"]),
            all_topics=options["all_topics"], execute=options["execute"],
            warn_dry_run=not options["execute"] and not options["dry_run"],
        )

    @classmethod
    def of(cls, scenario: str, value: object, topics: tuple[tuple[str, list[int] | None], ...],
           *, all_topics: bool, execute: bool, warn_dry_run: bool = False) -> ResetPlan:
        """A plan for one scenario (``to_offset``, ``shift_by``, ...), its value as the option
        takes it (an int or its text for --to-offset / --shift-by, the text of --to-datetime
        and --by-duration, nothing for the others); UsageError for a value it cannot take."""
        if scenario not in SCENARIOS:
            raise click.UsageError(f"unknown reset scenario {scenario!r}")
        timestamp = None
        offset = 0
        if scenario in ("to_offset", "shift_by"):
            try:
                offset = int(value)  # type: ignore[call-overload]
            except (TypeError, ValueError):
                raise click.UsageError(
                    f"{OPTION_NAMES[scenario]} takes an integer, got {value!r}") from None
        elif scenario == "to_datetime":
            timestamp = parse_datetime(str(value))
        elif scenario == "by_duration":
            duration = parse_duration(str(value))
            timestamp = int(time.time() * 1000) - duration // dt.timedelta(milliseconds=1)
        checkpoint_alias = str(value) if scenario == "to_checkpoint" else None
        return cls(scenario=scenario, topics=topics, all_topics=all_topics, execute=execute,
                   warn_dry_run=warn_dry_run, offset=offset, timestamp=timestamp,
                   checkpoint_alias=checkpoint_alias)


# --- talking to the cluster ----------------------------------------------------------------------



class GroupTool:
    """The admin calls the actions share, each bounded by the request timeout."""

    def __init__(self, admin: AdminClient, metadata: ClusterMetadata, timeout: float,
                 pool: Callable[[], WirePool] | None) -> None:
        self.admin = admin
        self.metadata = metadata
        self.timeout = timeout
        # connections for the requests the admin client lacks (None: the --command-config
        # asks for what only the client can do; its answers then, with fewer details)
        self.pool = pool
        # a consumer's config for this cluster (--to-checkpoint reads the checkpoints topic)
        self.consumer_config: dict[str, Any] = {}
        # Kafka's notices and warnings: printed on stderr once the action has succeeded (on an
        # error, its one line is all that goes to stderr).
        self.notes: list[str] = []

    def wait(self, future: Future[Any]) -> Any:
        try:
            return future.result(timeout=self.timeout + 5)
        except TimeoutError as exc:
            raise ToolError(f"REQUEST_TIMED_OUT: no answer within {self.timeout:g} s") from exc

    # groups ------------------------------------------------------------------------------

    def list_groups(self, states: set[str] | None = None, types: set[str] | None = None
                    ) -> list[Listed]:
        """Every group of consumers (classic and consumer groups), sorted by id; only those
        in ``states`` and of ``types`` when given."""
        if self.pool is None:
            listed = self._client_list_groups()
        else:
            with self.pool() as pool:
                listed = wire_list_groups(pool)
        return [g for g in listed if (not states or g.state in states)
                and (not types or g.type in types)]

    def _client_list_groups(self) -> list[Listed]:
        result = self.wait(self.admin.list_consumer_groups(request_timeout=self.timeout))
        if result.errors:
            raise ToolError("; ".join(describe_error(e) for e in result.errors))
        return sorted(
            (Listed(g.group_id, "consumer" if getattr(g, "type", None) ==
                    ConsumerGroupType.CONSUMER else "classic",
                    state_name(getattr(g, "state", None))) for g in result.valid or []),
            key=lambda g: g.group_id)

    def consumer_details(self, described: Mapping[str, ConsumerGroupDescription | None]
                         ) -> dict[str, ConsumerGroupDetail]:
        """ConsumerGroupDescribe of the described groups that are consumer groups."""
        wanted = [g for g, d in described.items()
                  if d is not None and getattr(d, "type", None) == ConsumerGroupType.CONSUMER]
        if not wanted or self.pool is None:
            return {}
        with self.pool() as pool:
            return describe_consumer_groups(pool, wanted)

    def describe_groups(
        self, group_ids: Sequence[str]
    ) -> dict[str, ConsumerGroupDescription | None]:
        """Each group's description; None for a group that does not exist."""
        if not group_ids:
            return {}
        futures = self.admin.describe_consumer_groups(
            list(group_ids), request_timeout=self.timeout
        )
        described: dict[str, ConsumerGroupDescription | None] = {}
        for group_id in group_ids:
            try:
                description = self.wait(futures[group_id])
            except KafkaException as exc:
                if error_code(exc) == ErrorCode.group_id_not_found:
                    described[group_id] = None
                    continue
                raise
            dead = getattr(description, "state", None) == ConsumerGroupState.DEAD
            described[group_id] = None if dead else description
        return described

    def committed(self, group_id: str) -> dict[TP, TopicPartition]:
        """The group's committed offsets (partitions without one are left out)."""
        futures = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout
        )
        try:
            result = self.wait(futures[group_id])
        except KafkaException as exc:
            if error_code(exc) == ErrorCode.group_id_not_found:
                return {}
            raise
        offsets: dict[TP, TopicPartition] = {}
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise ToolError(
                    f"{describe_error(tp.error)} ({partition_name(tp.topic, tp.partition)})"
                )
            if tp.offset >= 0:
                offsets[(tp.topic, tp.partition)] = tp
        return offsets

    # partitions ----------------------------------------------------------------------------

    def partitions_of(self, topic: str) -> list[int]:
        entry = self.metadata.topics.get(topic)
        if entry is None or entry.error is not None:
            raise ToolError(f"UNKNOWN_TOPIC_OR_PARTITION: Topic '{topic}' does not exist")
        return sorted(entry.partitions)

    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader; None when the topic or partition is unknown or leaderless."""
        entry = self.metadata.topics.get(topic)
        if entry is None or partition not in entry.partitions:
            return None
        leader = entry.partitions[partition].leader
        return leader if leader >= 0 else None

    def log_offsets(
        self, partitions: Iterable[TP], spec: OffsetSpec
    ) -> tuple[dict[TP, int], dict[TP, str]]:
        """ListOffsets for each partition: (offsets, error texts)."""
        request = {TopicPartition(t, p): spec for t, p in partitions}
        if not request:
            return {}, {}
        futures = self.admin.list_offsets(request, request_timeout=self.timeout)
        offsets: dict[TP, int] = {}
        errors: dict[TP, str] = {}
        for tp, future in futures.items():
            key = (tp.topic, tp.partition)
            try:
                offsets[key] = self.wait(future).offset
            except KafkaException as exc:
                errors[key] = describe_error(exc)
        return offsets, errors

    def log_offsets_or_fail(self, partitions: Iterable[TP], spec: OffsetSpec, what: str
                            ) -> dict[TP, int]:
        offsets, errors = self.log_offsets(partitions, spec)
        if errors:
            tp, error = sorted(errors.items())[0]
            raise ToolError(
                f"Error getting {what} of topic partition {partition_name(*tp)}: {error}"
            )
        return offsets

    # --list --------------------------------------------------------------------------------

    def print_list(self, states: set[str], with_state: bool, types: set[str],
                   with_type: bool) -> None:
        listed = self.list_groups(states, types)
        if not with_state and not with_type:
            for group in listed:
                click.echo(group.group_id)
            return
        width = max((max(15, len(g.group_id)) for g in listed), default=15) + 10
        header = ["GROUP", *(["TYPE"] if with_type else []), *(["STATE"] if with_state else [])]
        widths = [width, *([20] if with_type and with_state else [])]
        click.echo(format_line(header, widths))
        for g in listed:
            row = [g.group_id, *([g.type.capitalize()] if with_type else []),
                   *([g.state] if with_state else [])]
            click.echo(format_line(row, widths))

    # --describe ----------------------------------------------------------------------------

    def describe(self, group_ids: Sequence[str], options: Mapping[str, Any]) -> None:
        described = self.describe_groups(group_ids)
        details = (self.consumer_details(described)
                   if options["members"] or options["state"] is not None else {})
        for group_id in sorted(described):
            description = described[group_id]
            if description is None:
                continue
            if options["members"]:
                self._print_members(group_id, description, options["verbose"],
                                    details.get(group_id))
            elif options["state"] is not None:
                self._print_state(group_id, description, options["verbose"],
                                  details.get(group_id))
            else:
                self._print_offsets(group_id, description, options["verbose"])
        missing = [
            f"Consumer group '{g}' does not exist." for g in sorted(described) if not described[g]
        ]
        if missing:
            raise ToolError(" ".join(missing))

    def _announce(self, group_id: str, description: ConsumerGroupDescription) -> None:
        """Kafka's notices about a group that is not Stable."""
        state = getattr(description, "state", None)
        if state == ConsumerGroupState.EMPTY:
            self.notes.append(f"Consumer group '{group_id}' has no active members.")
        elif state in (ConsumerGroupState.PREPARING_REBALANCING,
                       ConsumerGroupState.COMPLETING_REBALANCING):
            self.notes.append(f"Warning: Consumer group '{group_id}' is rebalancing.")

    def _print_offsets(
        self, group_id: str, description: ConsumerGroupDescription, verbose: bool
    ) -> None:
        committed = self.committed(group_id)
        # Members with an assignment, most partitions first (Kafka's order), then the partitions
        # that have an offset but no member.
        rows: list[tuple[TP, str, str, str]] = []
        assigned: set[TP] = set()
        members = [m for m in description.members if m.assignment.topic_partitions]
        members.sort(key=lambda m: len(m.assignment.topic_partitions), reverse=True)
        for member in members:
            tps = sorted({(tp.topic, tp.partition) for tp in member.assignment.topic_partitions})
            assigned.update(tps)
            rows += [(tp, member.member_id, member.host, member.client_id) for tp in tps]
        rows += [(tp, MISSING, MISSING, MISSING) for tp in sorted(set(committed) - assigned)]
        self._announce(group_id, description)
        if not rows:
            return
        with_leader = [tp for tp, *_ in rows if self.leader(*tp) is not None]
        end_offsets, _ = self.log_offsets(with_leader, OffsetSpec.latest())

        table = []
        for tp, consumer_id, host, client_id in rows:
            commit = committed.get(tp)
            current = commit.offset if commit is not None else None
            end = end_offsets.get(tp)
            lag = end - current if current is not None and end is not None else None
            epoch = getattr(commit, "leader_epoch", None) if commit is not None else None
            values: list[object] = [group_id, tp[0], tp[1]]
            if verbose:
                values.append(epoch if epoch is not None and epoch >= 0 else MISSING)
            values += [_dash(current), _dash(end), _dash(lag), consumer_id, host, client_id]
            table.append(values)
        widths = [
            _width([group_id]), _width(tp[0] for tp, *_ in rows), 10,
            *([15] if verbose else []), 15, 15, 15,
            _width(r[1] for r in rows), _width(r[2] for r in rows),
        ]
        header = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []),
                  "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        print_table(header, table, widths)

    def _print_members(
        self, group_id: str, description: ConsumerGroupDescription, verbose: bool,
        detail: ConsumerGroupDetail | None = None,
    ) -> None:
        self._announce(group_id, description)
        members = description.members
        if not members:
            return
        with_instance = any(m.group_instance_id for m in members)
        rows = []
        for m in members:
            tps = [(tp.topic, tp.partition) for tp in m.assignment.topic_partitions]
            row: list[object] = [group_id, m.member_id]
            if with_instance:
                row.append(m.group_instance_id or "")
            row += [m.host, m.client_id, len(tps)]
            if verbose:  # epochs and target assignments: a consumer group's members only
                known = detail.members.get(m.member_id) if detail is not None else None
                row += [MISSING, assignment_text(tps), MISSING, MISSING] if known is None else [
                    known.epoch, assignment_text(tps), detail.assignment_epoch,  # type: ignore
                    assignment_text(known.target)]
            rows.append(row)
        widths = [_width([group_id]), _width(m.member_id for m in members)]
        header = ["GROUP", "CONSUMER-ID"]
        if with_instance:
            widths.append(_width((m.group_instance_id or "" for m in members), 17))
            header.append("GROUP-INSTANCE-ID")
        widths += [_width(m.host for m in members), _width(m.client_id for m in members), 15]
        header += ["HOST", "CLIENT-ID", "#PARTITIONS"]
        if verbose:
            widths += [15, 20, 15, 20]
            header += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        print_table(header, rows, widths)

    def _print_state(
        self, group_id: str, description: ConsumerGroupDescription, verbose: bool,
        detail: ConsumerGroupDetail | None = None,
    ) -> None:
        node = description.coordinator
        coordinator = f"{node.host}:{node.port}  ({node.id_string})" if node else MISSING
        strategy = description.partition_assignor or MISSING
        state = (detail.state if detail is not None
                 else state_name(getattr(description, "state", None)))
        widths = [_width([group_id]), _width([coordinator], 25), 20, 20]
        header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
        row: list[object] = [group_id, coordinator, strategy, state]
        if verbose:
            # Epochs of KIP-848 groups; a classic group has none.
            widths += [15, 25]
            header += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
            row += ([MISSING, MISSING] if detail is None
                    else [detail.group_epoch, detail.assignment_epoch])
        print_table([*header, "#MEMBERS"], [[*row, len(description.members)]], widths)

    # --delete ------------------------------------------------------------------------------

    def delete(self, group_ids: Sequence[str]) -> None:
        futures = (
            self.admin.delete_consumer_groups(list(group_ids), request_timeout=self.timeout)
            if group_ids else {}
        )
        deleted: list[str] = []
        failed: list[str] = []
        for group_id in group_ids:
            try:
                self.wait(futures[group_id])
                deleted.append(group_id)
            except (KafkaException, ToolError) as exc:
                detail = describe_error(exc) if isinstance(exc, KafkaException) else exc.message
                failed.append(f"Group '{group_id}' could not be deleted due to: {detail}")
        quoted = ", ".join(f"'{g}'" for g in deleted)
        if not failed:
            click.echo(f"Deletion of requested consumer groups ({quoted}) was successful.")
            return
        if deleted:
            click.echo(f"These consumer groups were deleted successfully: {quoted}")
        raise ToolError("Deletion of some consumer groups failed: " + "; ".join(failed))

    # --reset-offsets -----------------------------------------------------------------------

    def reset(self, group_ids: Sequence[str], plan: ResetPlan) -> None:
        if plan.warn_dry_run:
            self.notes.append(DRY_RUN_WARNING)
        planned = self.reset_plan(group_ids, plan)
        rows = [
            (group_id, topic, partition, offset)
            for group_id, offsets in sorted(planned.items())
            for (topic, partition), offset in sorted(offsets.items())
        ]
        if rows:
            widths = [_width(r[0] for r in rows), _width(r[1] for r in rows), 10]
            print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, widths)

    def reset_plan(self, group_ids: Sequence[str], plan: ResetPlan) -> dict[str, dict[TP, int]]:
        """Each group's new offsets (committed when ``plan.execute``); a ToolError, as Kafka
        says it, for a group that has members."""
        described = self.describe_groups(group_ids)
        for group_id in group_ids:
            description = described[group_id]
            if description is None:
                continue  # Kafka resets a group that does not exist yet (it gets created)
            state = getattr(description, "state", None)
            if state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
                raise ToolError(
                    f"Assignments can only be reset if the group '{group_id}' is inactive, but"
                    f" the current state is {state_name(state)}."
                )
        planned = {group_id: self._plan(group_id, plan) for group_id in group_ids}
        if plan.execute:
            for group_id, offsets in planned.items():
                self._commit(group_id, offsets)
        return planned

    def _chosen(self, plan: ResetPlan, known: Iterable[TP]) -> list[TP]:
        """The partitions --all-topics (those ``known``) or --topic name, once each."""
        chosen: list[TP] = sorted(known) if plan.all_topics else []
        for topic, partitions in plan.topics:
            if partitions is None:
                partitions = self.partitions_of(topic)
            chosen += [(topic, p) for p in partitions]
        return list(dict.fromkeys(chosen))

    def _partitions_to_reset(
        self, plan: ResetPlan, committed: dict[TP, TopicPartition]
    ) -> list[TP]:
        chosen = self._chosen(plan, committed)
        unknown = [tp for tp in chosen if tp[0] not in self.metadata.topics
                   or tp[1] not in self.metadata.topics[tp[0]].partitions]
        if unknown:
            names = ",".join(partition_name(*tp) for tp in unknown)
            raise ToolError(f'UNKNOWN_TOPIC_OR_PARTITION: The partitions "{names}" do not exist')
        leaderless = [tp for tp in chosen if self.leader(*tp) is None]
        if leaderless:
            names = ",".join(partition_name(*tp) for tp in leaderless)
            raise ToolError(f'LEADER_NOT_AVAILABLE: The partitions "{names}" have no leader')
        return chosen

    def _plan(self, group_id: str, plan: ResetPlan) -> dict[TP, int]:
        if plan.scenario == "to_checkpoint":
            return self._translated(group_id, plan)
        committed = self.committed(group_id)
        partitions = self._partitions_to_reset(plan, committed)
        if not partitions:
            return {}
        scenario = plan.scenario
        if scenario == "to_earliest":
            return self.log_offsets_or_fail(partitions, OffsetSpec.earliest(), "starting offset")
        if scenario == "to_latest":
            return self.log_offsets_or_fail(partitions, OffsetSpec.latest(), "ending offset")
        if scenario == "to_current":
            new = {tp: committed[tp].offset for tp in partitions if tp in committed}
            without = [tp for tp in partitions if tp not in committed]
            new.update(self.log_offsets_or_fail(without, OffsetSpec.latest(), "ending offset"))
            return new
        if scenario in ("to_datetime", "by_duration"):
            assert plan.timestamp is not None
            found = self.log_offsets_or_fail(
                partitions, OffsetSpec.for_timestamp(plan.timestamp), "offset by timestamp"
            )
            empty = sorted(tp for tp, offset in found.items() if offset < 0)
            for topic, partition in empty:
                self.notes.append(
                    f"Warn: Partition {partition} from topic {topic} is empty. Falling back to"
                    " latest known offset."
                )
            found.update(self.log_offsets_or_fail(empty, OffsetSpec.latest(), "ending offset"))
            return found
        if scenario == "shift_by":
            for tp in partitions:
                if tp not in committed:
                    raise ToolError(
                        f"Cannot shift offset for partition {partition_name(*tp)} since there is"
                        " no current committed offset"
                    )
            requested = {tp: committed[tp].offset + plan.offset for tp in partitions}
        else:
            requested = dict.fromkeys(partitions, plan.offset)
        return self._clamped(requested)

    def _translated(self, group_id: str, plan: ResetPlan) -> dict[TP, int]:
        """The latest checkpoints of the group from cluster ``plan.checkpoint_alias``; with
        --topic, of those partitions (a partition without one is left as it is, noted)."""
        assert plan.checkpoint_alias is not None
        try:
            translated = translate_offsets(self.consumer_config, plan.checkpoint_alias, group_id,
                                           timeout_s=self.timeout)
        except LookupError as exc:
            raise ToolError(f"--to-checkpoint {plan.checkpoint_alias}: {exc}") from exc
        found = {tp: offset for tp, (offset, _) in translated.items()}
        chosen = self._chosen(plan, found)
        for tp in chosen:
            if tp not in found:
                self.notes.append(f"WARN: No checkpoint of group {group_id} from "
                                  f"{plan.checkpoint_alias} for {partition_name(*tp)}; "
                                  "its offset is left as it is.")
        return self._clamped({tp: found[tp] for tp in chosen if tp in found})

    def _clamped(self, requested: dict[TP, int]) -> dict[TP, int]:
        earliest = self.log_offsets_or_fail(requested, OffsetSpec.earliest(), "starting offset")
        latest = self.log_offsets_or_fail(requested, OffsetSpec.latest(), "ending offset")
        result = {}
        for tp, offset in requested.items():
            result[tp] = clamp(offset, earliest.get(tp), latest.get(tp))
            if result[tp] != offset:
                side = "higher than latest" if offset > result[tp] else "lower than earliest"
                self.notes.append(
                    f"WARN: New offset ({offset}) is {side} offset for topic partition"
                    f" {partition_name(*tp)}. Value will be set to {result[tp]}."
                )
        return result

    def _commit(self, group_id: str, offsets: dict[TP, int]) -> None:
        if not offsets:
            return
        request = ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        )
        futures = self.admin.alter_consumer_group_offsets(
            [request], request_timeout=self.timeout
        )
        result = self.wait(futures[group_id])
        errors = [
            f"{describe_error(tp.error)} ({partition_name(tp.topic, tp.partition)})"
            for tp in result.topic_partitions or [] if tp.error is not None
        ]
        if errors:
            raise ToolError("; ".join(errors))


def _dash(value: int | None) -> object:
    return MISSING if value is None else value

def delete_group_offsets(
    bootstrap: str, extra: Mapping[str, str], tool: GroupTool, group_id: str,
    topic_args: Sequence[str], timeout: float,
) -> None:
    """--delete-offsets: Kafka's output table; any failure is the one error line."""
    security = WireSecurity.from_properties(extra, "--delete-offsets")
    statuses: dict[TP, str | None] = {}  # None: deleted
    partitions: list[TP] = []
    for arg in topic_args:
        topic, chosen = parse_topic_arg(arg)
        if chosen is None:
            try:
                chosen = tool.partitions_of(topic)
            except ToolError as exc:
                statuses[(topic, -1)] = exc.message
                continue
        partitions += [(topic, p) for p in chosen]
    partitions = list(dict.fromkeys(partitions))
    top, codes = (ErrorCode.none, {}) if not partitions else offset_delete(
        bootstrap, group_id, partitions, timeout, security
    )
    if top not in (ErrorCode.none, ErrorCode.group_subscribed_to_topic,
                   ErrorCode.topic_authorization_failed, ErrorCode.unknown_topic_or_partition):
        raise ToolError(error_text(top))
    for tp in partitions:
        code = codes.get(tp, top if top != ErrorCode.none else ErrorCode.none)
        statuses[tp] = None if code == ErrorCode.none else error_text(code)
    failed = {tp: s for tp, s in statuses.items() if s is not None}
    if not failed:
        click.echo(f"Request succeeded for deleting offsets from group {group_id}.")
    rows = [
        (topic, partition if partition >= 0 else MISSING,
         "Successful" if status is None else f"Error: {status}")
        for (topic, partition), status in sorted(statuses.items())
    ]
    print_table(["TOPIC", "PARTITION", "STATUS"], rows, [_width(r[0] for r in rows), 10])
    if failed:
        first_tp, first = next(iter(sorted(failed.items())))
        where = first_tp[0] if first_tp[1] < 0 else partition_name(*first_tp)
        raise ToolError(
            f"Deleting offsets from group {group_id} failed for {len(failed)} of"
            f" {len(statuses)} partition(s); first: {where}: {first}"
        )
