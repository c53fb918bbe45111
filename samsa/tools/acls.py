"""``samsa acls``: kafka-acls.sh (--add, --remove, --list) through the admin client's
CreateAcls, DeleteAcls and DescribeAcls, with kafka-acls' flags and output (a space and a tab
before each entry)::

    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
      (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

As Kafka 3.x's tool, --add and --remove then list the ACLs of the resources they named
("Current ACLs for resource ..."). --producer and --consumer are kafka-acls' conveniences:
WRITE, DESCRIBE and CREATE on the topics (and WRITE, DESCRIBE on the transactional ids,
IDEMPOTENT_WRITE on the cluster with --idempotent); READ and DESCRIBE on the topics, READ on
the groups. Errors are one ``samsa:`` line (kafka-acls prints a stack trace).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import click
from confluent_kafka.admin import AclBinding, AclBindingFilter, AdminClient

from samsa.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    parse_principal,
)
from samsa.tools.admin import connect_admin, raise_errors, results
from samsa.tools.common import (
    REQUEST_TIMEOUT_S,
    bootstrap_option,
    command_config_option,
    handle_client_errors,
    read_properties_file,
)

NEWLINE = "\n"
PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED,
                 "any": PatternType.ANY, "match": PatternType.MATCH}
CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
PRODUCER_TOPIC_OPS = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
PRODUCER_TXN_OPS = (AclOperation.WRITE, AclOperation.DESCRIBE)
CONSUMER_TOPIC_OPS = (AclOperation.READ, AclOperation.DESCRIBE)
# A resource filter (type, name, pattern type) and the entries an action is about.
Filter = ResourcePatternFilter
Entries = set[AccessControlEntry]


# --- Kafka's text ------------------------------------------------------------------------------


def pattern_text(resource_type: ResourceType, name: str | None, pattern_type: PatternType) -> str:
    """Kafka's ResourcePattern (and ResourcePatternFilter) toString."""
    return (f"ResourcePattern(resourceType={resource_type.name}, "
            f"name={'<any>' if name is None else name}, patternType={pattern_type.name})")


def entry_text(entry: AccessControlEntry) -> str:
    """Kafka's AccessControlEntry toString."""
    return (f"(principal={entry.principal}, host={entry.host}, "
            f"operation={entry.operation.name}, permissionType={entry.permission_type.name})")


def _block(header: str, entries: Iterable[AccessControlEntry]) -> str:
    """kafka-acls' ``header: \\n \\t(entry)\\n\\t(entry) \\n`` (println adds the blank line)."""
    lines = NEWLINE.join("\t" + entry_text(e) for e in _sorted(entries))
    return f"{header}: {NEWLINE} {lines} {NEWLINE}"


def _sorted(entries: Iterable[AccessControlEntry]) -> list[AccessControlEntry]:
    return sorted(entries, key=lambda e: (e.principal, e.host, e.operation.name,
                                          e.permission_type.name))


def parse_operation(name: str) -> AclOperation:
    """Kafka's SecurityUtils.operation: any case, with or without underscores."""
    operation = AclOperation.from_name(name.strip().replace("_", ""))
    if operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise click.UsageError(f"Unknown operation: {name}")
    return operation


def _principals(values: Sequence[str], option: str) -> list[str]:
    out = []
    for value in values:
        try:
            kind, name = parse_principal(value.strip())
        except ValueError as exc:
            raise click.UsageError(f"{option}: {exc}") from None
        out.append(f"{kind}:{name}")
    return out


# --- the confluent-kafka side --------------------------------------------------------------------


def _binding(pattern: ResourcePattern, entry: AccessControlEntry) -> AclBinding:
    return AclBinding(int(pattern.resource_type), pattern.name, int(pattern.pattern_type),
                      entry.principal, entry.host, int(entry.operation),
                      int(entry.permission_type))


def _binding_filter(pattern: Filter, entry: AccessControlEntry | None) -> AclBindingFilter:
    if entry is None:
        return AclBindingFilter(int(pattern.resource_type), pattern.name,
                                int(pattern.pattern_type), None, None, int(AclOperation.ANY),
                                int(AclPermissionType.ANY))
    return AclBindingFilter(int(pattern.resource_type), pattern.name, int(pattern.pattern_type),
                            entry.principal, entry.host, int(entry.operation),
                            int(entry.permission_type))


def _code(value: object) -> int:
    return int(getattr(value, "value", value))


def _from_client(binding: AclBinding) -> tuple[ResourcePattern, AccessControlEntry]:
    return (ResourcePattern(ResourceType.from_code(_code(binding.restype)), binding.name,
                            PatternType.from_code(_code(binding.resource_pattern_type))),
            AccessControlEntry(binding.principal, binding.host,
                               AclOperation.from_code(_code(binding.operation)),
                               AclPermissionType.from_code(_code(binding.permission_type))))


# --- the command ---------------------------------------------------------------------------------


@click.command("acls")
@bootstrap_option
@click.option("--add", is_flag=True, help="Add ACLs.")
@click.option("--remove", is_flag=True, help="Remove ACLs.")
@click.option("--list", "list_", is_flag=True, help="List ACLs (of the resources given, or all).")
@click.option("--topic", "topics", multiple=True,
              help="A topic the ACLs are about ('*': every topic).")
@click.option("--group", "groups", multiple=True,
              help="A consumer group the ACLs are about ('*': every group).")
@click.option("--cluster", is_flag=True, help="ACLs of the cluster.")
@click.option("--transactional-id", "transactional_ids", multiple=True,
              help="A transactional id the ACLs are about ('*': every one).")
@click.option("--resource-pattern-type", "pattern_type", default="literal",
              type=click.Choice(sorted(PATTERN_TYPES), case_sensitive=False),
              help="literal or prefixed (--add); also any or match (--list, --remove).")
@click.option("--operation", "operations", multiple=True,
              help="An operation to allow or deny (default: All).")
@click.option("--allow-principal", "allow_principals", multiple=True, metavar="TYPE:NAME",
              help="A principal to allow (User:alice; User:* for everyone).")
@click.option("--deny-principal", "deny_principals", multiple=True, metavar="TYPE:NAME",
              help="A principal to deny.")
@click.option("--allow-host", "allow_hosts", multiple=True,
              help="A host --allow-principal applies from (default: *).")
@click.option("--deny-host", "deny_hosts", multiple=True,
              help="A host --deny-principal applies from (default: *).")
@click.option("--principal", "list_principals", multiple=True, metavar="TYPE:NAME",
              help="With --list: only the ACLs of this principal.")
@click.option("--producer", is_flag=True,
              help="Producer ACLs: WRITE, DESCRIBE, CREATE on the topics.")
@click.option("--consumer", is_flag=True,
              help="Consumer ACLs: READ, DESCRIBE on the topics, READ on the groups.")
@click.option("--idempotent", is_flag=True,
              help="With --producer: IDEMPOTENT_WRITE on the cluster.")
@click.option("--force", is_flag=True, help="Do not ask before removing.")
@command_config_option
@handle_client_errors
def acls(
    bootstrap_server: str, add: bool, remove: bool, list_: bool, topics: tuple[str, ...],
    groups: tuple[str, ...], cluster: bool, transactional_ids: tuple[str, ...],
    pattern_type: str, operations: tuple[str, ...], allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...], allow_hosts: tuple[str, ...],
    deny_hosts: tuple[str, ...], list_principals: tuple[str, ...], producer: bool,
    consumer: bool, idempotent: bool, force: bool, command_config: Path | None,
) -> None:
    """Add, remove and list ACLs, as kafka-acls.sh does."""
    if (add, remove, list_).count(True) != 1:
        raise click.UsageError("Command must include exactly one action: --list, --add, --remove.")
    kind = PATTERN_TYPES[pattern_type.lower()]
    if list_ and (producer or consumer or allow_hosts or allow_principals or deny_hosts
                  or deny_principals):
        raise click.UsageError("--list does not take --producer, --consumer, --allow-*, "
                               "--deny-*")
    if (producer or consumer) and (operations or deny_principals or deny_hosts):
        raise click.UsageError("--producer and --consumer do not take --operation, "
                               "--deny-principal or --deny-host")
    if list_principals and not list_:
        raise click.UsageError("The --principal option is only available if --list is set")
    if producer and not topics:
        raise click.UsageError("With --producer you must specify a --topic")
    if idempotent and not producer:
        raise click.UsageError("The --idempotent option is only available if --producer is set")
    if consumer and (not topics or not groups or (not producer and (
            cluster or transactional_ids))):
        raise click.UsageError("With --consumer you must specify a --topic and a --group and no "
                               "--cluster or --transactional-id option should be specified.")
    if add and not kind.is_specific:
        raise click.UsageError(f"A '--resource-pattern-type' value of '{kind.name}' is not "
                               "valid when adding acls.")
    resources = _resources(topics, groups, cluster or idempotent, transactional_ids, kind)
    allowed = _principals(allow_principals, "--allow-principal")
    denied = _principals(deny_principals, "--deny-principal")
    listed = _principals(list_principals, "--principal")
    ops = [parse_operation(o) for o in operations] or [AclOperation.ALL]

    def entries(operations: Iterable[AclOperation]) -> Entries:
        found: Entries = set()
        for principals, hosts, permission in (
                (allowed, allow_hosts, AclPermissionType.ALLOW),
                (denied, deny_hosts, AclPermissionType.DENY)):
            for principal in principals:
                for host in [h.strip() for h in hosts] or [WILDCARD_HOST]:
                    for operation in operations:
                        found.add(AccessControlEntry(principal, host, operation, permission))
        return found

    to_acls: dict[Filter, Entries] = {}
    if not (producer or consumer):
        to_acls.update({r: entries(ops) for r in resources})
    if producer:
        for r in resources:
            if r.resource_type is ResourceType.TOPIC:
                to_acls[r] = entries(PRODUCER_TOPIC_OPS)
            elif r.resource_type is ResourceType.TRANSACTIONAL_ID:
                to_acls[r] = entries(PRODUCER_TXN_OPS)
        if idempotent:
            to_acls[CLUSTER_FILTER] = entries([AclOperation.IDEMPOTENT_WRITE])
    if consumer:
        for r in resources:
            if r.resource_type is ResourceType.TOPIC:
                to_acls[r] = to_acls.get(r, set()) | entries(CONSUMER_TOPIC_OPS)
            elif r.resource_type is ResourceType.GROUP:
                to_acls[r] = to_acls.get(r, set()) | entries([AclOperation.READ])
    if not list_:
        if not resources:
            raise click.UsageError("You must provide at least one resource: --topic <topic> or "
                                   "--cluster or --group <group>")
        _check_operations(to_acls)
    if add and any(not e for e in to_acls.values()):
        raise click.UsageError("You must specify one of: --allow-principal, --deny-principal "
                               "when trying to add ACLs.")

    extra = read_properties_file(command_config, "--command-config")
    admin, _ = connect_admin(bootstrap_server, "samsa-acls", extra)
    if add:
        _add(admin, to_acls)
    elif remove:
        _remove(admin, to_acls, force)
    if list_:
        _list(admin, resources, listed)
    else:
        _list(admin, list(to_acls), [])


def _resources(topics: Sequence[str], groups: Sequence[str], cluster: bool,
               transactional_ids: Sequence[str], kind: PatternType) -> list[Filter]:
    found = [Filter(ResourceType.TOPIC, t.strip(), kind) for t in topics]
    if cluster and kind is PatternType.LITERAL:
        found.append(CLUSTER_FILTER)
    found += [Filter(ResourceType.GROUP, g.strip(), kind) for g in groups]
    found += [Filter(ResourceType.TRANSACTIONAL_ID, t, kind) for t in transactional_ids]
    return list(dict.fromkeys(found))


def _check_operations(to_acls: dict[Filter, Entries]) -> None:
    for resource, entries in to_acls.items():
        valid = SUPPORTED_OPERATIONS[resource.resource_type] | {AclOperation.ALL}
        if any(e.operation not in valid for e in entries):
            names = ", ".join(o.pascal_name for o in sorted(valid))
            raise click.UsageError(f"ResourceType {resource.resource_type.name} only supports "
                                   f"operations {names}")


def _add(admin: AdminClient, to_acls: dict[Filter, Entries]) -> None:
    for resource, entries in to_acls.items():
        pattern = ResourcePattern(resource.resource_type, str(resource.name),
                                  resource.pattern_type)
        click.echo(_block(f"Adding ACLs for resource `{_text(resource)}`", entries))
        futures = admin.create_acls([_binding(pattern, e) for e in _sorted(entries)],
                                    request_timeout=REQUEST_TIMEOUT_S)
        _, errors = results(futures, REQUEST_TIMEOUT_S + 5)
        raise_errors(errors)


def _remove(admin: AdminClient, to_acls: dict[Filter, Entries], force: bool) -> None:
    for resource, entries in to_acls.items():
        if entries:
            question = _block("Are you sure you want to remove ACLs", entries).rstrip() + \
                f" {NEWLINE} from resource filter `{_text(resource)}`? (y/n)"
        else:
            question = (f"Are you sure you want to delete all ACLs for resource filter "
                        f"`{_text(resource)}`? (y/n)")
        if not force and not _confirm(question):
            continue
        filters = [_binding_filter(resource, e) for e in _sorted(entries)] or [
            _binding_filter(resource, None)]
        futures = admin.delete_acls(filters, request_timeout=REQUEST_TIMEOUT_S)
        _, errors = results(futures, REQUEST_TIMEOUT_S + 5)
        raise_errors(errors)


def _confirm(question: str) -> bool:
    click.echo(question)
    answer = sys.stdin.readline()
    return answer.strip().lower() == "y"


def _list(admin: AdminClient, resources: list[Filter], principals: list[str]) -> None:
    filters = [_binding_filter(r, None) for r in resources] or [
        AclBindingFilter(int(ResourceType.ANY), None, int(PatternType.ANY), None, None,
                         int(AclOperation.ANY), int(AclPermissionType.ANY))]
    found: dict[ResourcePattern, Entries] = {}
    for binding_filter in filters:
        future = admin.describe_acls(binding_filter, request_timeout=REQUEST_TIMEOUT_S)
        described, errors = results({0: future}, REQUEST_TIMEOUT_S + 5)
        raise_errors(errors)
        for binding in described.get(0, []):
            pattern, entry = _from_client(binding)
            found.setdefault(pattern, set()).add(entry)
    ordered = sorted(found.items(), key=lambda item: (
        item[0].resource_type.name, item[0].name, item[0].pattern_type.name))
    groups = [(None, ordered)] if not principals else [
        (p, [(r, {e for e in es if e.principal == p}) for r, es in ordered]) for p in principals]
    for principal, items in groups:
        if principal is not None:
            click.echo(f"ACLs for principal `{principal}`")
        for pattern, entries in items:
            if entries:
                click.echo(_block(f"Current ACLs for resource `{_text(pattern)}`", entries))


def _text(resource: Filter | ResourcePattern) -> str:
    name = resource.name
    return pattern_text(resource.resource_type, name, resource.pattern_type)
