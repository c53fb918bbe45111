"""Client quotas in the request path: Kafka's ClientQuotaManager for ``producer_byte_rate``
(Produce), ``consumer_byte_rate`` (Fetch) and ``request_percentage`` (every request), and its
ControllerMutationQuotaManager for ``controller_mutation_rate`` (CreateTopics,
CreatePartitions, DeleteTopics), fed by the quota store (``samsa.cluster.client_quotas``: the
metadata dir or ZooKeeper) and called from ``KafkaServer.dispatch``.

**Which quota applies.** For a request of user U (the connection's principal name) with client
id C, the most specific of Kafka's entities that has a quota of the kind (DefaultQuotaCallback):
``/config/users/U/clients/C``, ``users/U/clients/<default>``, ``users/U``,
``users/<default>/clients/C``, ``users/<default>/clients/<default>``, ``users/<default>``,
``clients/C``, ``clients/<default>``; none: no quota. The rate is measured per quota entity as
Kafka shares its sensors: under a user's quota all its clients share one rate, under a client
id's quota all users of that client id share one. Each kind is enabled from the first quota
of that kind set (until the restart, as Kafka's ``quotasEnabled``); until a quota is
configured anywhere, the request path pays one attribute test.

**Throttling** (KIP-219). A rate over its quota gives a throttle time, Kafka's
(O - T) / T * W over the rate's window W (``quota.window.num`` samples of
``quota.window.size.seconds``; request time's bounded by one window); the response goes out
at once with ``throttle_time_ms`` set to the largest of the request's throttle times, and the
connection is muted for that long (``Connection.throttle``: nothing more is read from it or
answered), so a client that ignores the field is held too. As in Kafka this holds for every
request version (Kafka's broker mutes alike; only clients tell old versions apart). A
throttled consumer fetch is answered empty and its bytes are not counted; a consumer fetch
asks at most what its quota allows in one window (Kafka's getMaxValueInQuotaWindow). A
produce with acks=0 is counted and mutes the connection, but is exempt from the request
quota; followers' fetches and WriteTxnMarkers (cluster actions) are exempt from all.

**request_percentage on an event loop.** Kafka measures the time request handler and network
threads spend on a client's requests, as a percentage of one thread (a quota of 200 is two
threads' worth). samsa serves every request on one asyncio loop, so the equivalent is the time
the loop spends running a client's request: the synchronous slices of its handler's coroutine
(each step between two suspensions, timed by ``_TimedCall``; time awaiting a long-poll,
replication or ZooKeeper is not the client's use of the loop, as a Kafka request in purgatory
uses no thread) with the throttle decided on it, then the encoding of its response recorded
without throttling (Kafka's network thread time). 100 is the whole loop.

**controller_mutation_rate** (KIP-599). A token bucket per quota entity (``rate`` tokens a
second, a burst of ``controller.quota.window.num`` windows of
``controller.quota.window.size.seconds``), one token per partition created or deleted. Strict
for CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+: while the bucket is empty a topic
is refused with THROTTLING_QUOTA_EXCEEDED (a request that starts with tokens left is taken
whole); permissive for older versions: accepted, and the client throttled until the tokens
are back.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, Protocol

from samsa.cluster.client_quotas import DEFAULT, Name, QuotaEntity, QuotaValues
from samsa.config import BrokerConfig
from samsa.rate import TokenBucket, WindowedRate, bounded_throttle_time_ms, throttle_time_ms

if TYPE_CHECKING:
    from samsa.handlers.context import RequestContext
    from samsa.handlers.registry import Api
    from samsa.protocol.codec import Request

log = logging.getLogger(__name__)

PRODUCE_KEY, FETCH_KEY, WRITE_TXN_MARKERS_KEY = 0, 1, 27
# Cluster actions Kafka exempts from the request quota (sendResponseExemptThrottle).
_EXEMPT = frozenset({WRITE_TXN_MARKERS_KEY})
_NANOS_TO_PERCENT = 100.0 / 1e9  # ClientRequestQuotaManager.NanosToPercentagePerSecond
# Sensors of clients gone quiet are dropped (Kafka's InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_EXPIRATION_S = 3600
_SWEEP_EVERY_MS = 60_000

# QuotaTypes: the levels at which quotas were set
_CLIENT_ID, _USER, _USER_CLIENT_ID = 1, 2, 4
_SINGLE_LEVELS = {0, _CLIENT_ID, _USER, _USER_CLIENT_ID}

Tags = tuple[str, str]  # Kafka's quota metric tags (user, client-id); "" where not part


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class _Sensor:
    """The rate (and, for controller mutations, the token bucket) one quota entity's clients
    share, and its quota."""

    __slots__ = ("tags", "bound", "rate", "bucket", "last_used_ms", "_bucketed")

    def __init__(self, tags: Tags, bound: float | None, samples: int, window_ms: float,
                 bucketed: bool, now_ms: float) -> None:
        self.tags = tags
        self.bound = bound
        self.rate = WindowedRate(samples, window_ms, now_ms)
        self._bucketed = bucketed
        self.bucket = (TokenBucket(bound, samples, window_ms, now_ms)
                       if bucketed and bound is not None else None)
        self.last_used_ms = now_ms

    def set_bound(self, bound: float | None, now_ms: float) -> None:
        self.bound = bound
        if not self._bucketed:
            return
        if bound is None:
            self.bucket = None  # Kafka's bucket without a quota: unlimited
        elif self.bucket is None:
            self.bucket = TokenBucket(bound, self.rate.samples, self.rate.window_ms, now_ms)
        else:
            self.bucket.set_rate(bound, now_ms)


class ClientQuotaManager:
    """One kind of client quota (Kafka's ClientQuotaManager with its DefaultQuotaCallback)."""

    def __init__(self, name: str, key: str, samples: int, window_ms: float,
                 max_throttle_ms: float | None = None, bucket: bool = False) -> None:
        self.name = name
        self.key = key  # the entity config key of this kind: producer_byte_rate, ...
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        self._bucket = bucket
        self.types_enabled = 0
        self.overridden: dict[QuotaEntity, float] = {}
        self._sensors: dict[Tags, _Sensor] = {}  # by metric tags
        self._lookup: dict[tuple[str, str], _Sensor] = {}  # (user, client id) -> its sensor
        self._next_sweep_ms = 0.0

    @property
    def enabled(self) -> bool:
        return self.types_enabled != 0

    def update(self, entity: QuotaEntity, bound: float | None) -> None:
        """The quota of ``entity`` is now ``bound`` (None: removed)."""
        if bound is None:
            if self.overridden.pop(entity, None) is None:
                return
            log.info("Removing %s quota for %s", self.name, entity)
        else:
            if entity.user is not None:
                self.types_enabled |= (_USER_CLIENT_ID if entity.client_id is not None
                                       else _USER)
            else:
                self.types_enabled |= _CLIENT_ID
            if self.overridden.get(entity) == bound:
                return
            self.overridden[entity] = bound
            log.info("Changing %s quota for %s to %s", self.name, entity, bound)
        # as Kafka's updateQuotaMetricConfigs: every sensor's quota again; and the
        # client -> sensor map again, since which entity a client falls under may change
        now = _now_ms()
        for sensor in self._sensors.values():
            sensor.set_bound(self.limit(sensor.tags), now)
        self._lookup.clear()

    # --- Kafka's DefaultQuotaCallback -------------------------------------------------------

    def _get(self, user: Name | None, client_id: Name | None) -> float | None:
        return self.overridden.get(QuotaEntity(user, client_id))

    def limit(self, tags: Tags) -> float | None:
        """quotaLimit: the quota of the sensor with these tags (None: unlimited)."""
        user, client_id = tags
        found: float | None = None
        if user and client_id:
            for u, c in ((user, client_id), (user, DEFAULT), (DEFAULT, client_id),
                         (DEFAULT, DEFAULT)):
                found = self._get(u, c)
                if found is not None:
                    break
        elif user:
            found = self._get(user, None)
            if found is None:
                found = self._get(DEFAULT, None)
        elif client_id:
            found = self._get(None, client_id)
            if found is None:
                found = self._get(None, DEFAULT)
        return found

    def tags(self, user: str, client_id: str) -> Tags:
        """quotaMetricTags: which quota entity's sensor a client's requests count against."""
        enabled = self.types_enabled
        if enabled in (0, _CLIENT_ID):
            return "", client_id
        if enabled == _USER:
            return user, ""
        if enabled == _USER_CLIENT_ID:
            return user, client_id
        has = self.overridden.__contains__
        if has(QuotaEntity(user, client_id)) or has(QuotaEntity(user, DEFAULT)):
            return user, client_id
        if has(QuotaEntity(user, None)):
            return user, ""
        if has(QuotaEntity(DEFAULT, client_id)) or has(QuotaEntity(DEFAULT, DEFAULT)):
            return user, client_id
        if has(QuotaEntity(DEFAULT, None)):
            return user, ""
        return "", client_id

    # --- recording ----------------------------------------------------------------------------

    def sensor(self, user: str, client_id: str, now_ms: float) -> _Sensor:
        key = (user, client_id)
        sensor = self._lookup.get(key)
        if sensor is None:
            if now_ms >= self._next_sweep_ms:
                self._sweep(now_ms)
            tags = self.tags(user, client_id)
            sensor = self._sensors.get(tags)
            if sensor is None:
                sensor = self._sensors[tags] = _Sensor(tags, self.limit(tags), self.samples,
                                                       self.window_ms, self._bucket, now_ms)
            self._lookup[key] = sensor
        sensor.last_used_ms = now_ms
        return sensor

    def _sweep(self, now_ms: float) -> None:
        self._next_sweep_ms = now_ms + _SWEEP_EVERY_MS
        idle = now_ms - INACTIVE_SENSOR_EXPIRATION_S * 1000
        gone = [tags for tags, s in self._sensors.items() if s.last_used_ms < idle]
        if gone:
            for tags in gone:
                del self._sensors[tags]
            self._lookup.clear()

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record ``value`` against the client's quota; the throttle time (0: within it)."""
        sensor = self.sensor(user, client_id, now_ms)
        sensor.rate.record(value, now_ms)
        bound = sensor.bound
        if bound is None:
            return 0
        if self.max_throttle_ms is not None:
            return bounded_throttle_time_ms(sensor.rate, bound, now_ms, self.max_throttle_ms)
        return throttle_time_ms(sensor.rate, bound, now_ms)

    def record_no_throttle(self, user: str, client_id: str, value: float,
                           now_ms: float) -> None:
        self.sensor(user, client_id, now_ms).rate.record(value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """getMaxValueInQuotaWindow: what can be recorded at once without being throttled for
        certain (None: no quota)."""
        bound = self.limit(self.tags(user, client_id))
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_ms / 1000.0


# --- controller mutations ----------------------------------------------------------------------


class MutationQuota:
    """The controller mutation quota of one request (Kafka's ControllerMutationQuota): no
    quota (this class), strict or permissive."""

    def record(self, permits: float) -> bool:
        """Take ``permits`` partitions; False: refused (strict, the quota is exhausted)."""
        return True

    @property
    def throttle_time_ms(self) -> int:
        return 0


UNBOUNDED = MutationQuota()


class _BucketQuota(MutationQuota):
    def __init__(self, bucket: TokenBucket) -> None:
        self.bucket = bucket
        self._throttle_ms = 0
        self._at_ms = 0.0

    @property
    def throttle_time_ms(self) -> int:
        """The throttle time less what passed since it was decided (the request may have
        waited for the topics to be created)."""
        return max(0, int(self._throttle_ms - (_now_ms() - self._at_ms)))


class StrictMutationQuota(_BucketQuota):
    def record(self, permits: float) -> bool:
        now = _now_ms()
        throttle = self.bucket.throttle_time_ms(now)
        if throttle > 0:
            self._throttle_ms, self._at_ms = throttle, now
            return False
        self.bucket.record(permits, now)
        return True


class PermissiveMutationQuota(_BucketQuota):
    def record(self, permits: float) -> bool:
        now = _now_ms()
        self.bucket.record(permits, now)
        throttle = self.bucket.throttle_time_ms(now)
        if throttle > 0:
            self._throttle_ms, self._at_ms = throttle, now
        return True


# --- the request path ----------------------------------------------------------------------------


class _TimedCall:
    """Awaits a coroutine, adding up the time of each of its synchronous steps."""

    __slots__ = ("coro", "nanos")

    def __init__(self, coro: Any) -> None:
        self.coro = coro
        self.nanos = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        clock = time.perf_counter_ns
        while True:
            start = clock()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                self.nanos += clock() - start
                return done.value
            except BaseException:
                self.nanos += clock() - start
                raise
            self.nanos += clock() - start
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # cancellation and the like: into the coroutine
                value, error = None, exc


class Throttled(Protocol):
    def throttle(self, ms: int) -> None: ...


class _Peer(Throttled, Protocol):
    @property
    def principal(self) -> Any: ...


Encode = Callable[["Request", "dict[str, Any] | None"], "list[Any] | None"]


def _follower(body: Any) -> bool:
    state = getattr(body, "replica_state", None)  # v15+
    replica_id = state.replica_id if state is not None else getattr(body, "replica_id", -1)
    return replica_id >= 0


class ClientQuotas:
    """The four quota managers, kept in step with the quota store (``update``), and the hook
    ``KafkaServer.dispatch`` calls once any quota is set (``active``)."""

    def __init__(self, config: BrokerConfig) -> None:
        samples = config.get("quota.window.num")
        window_ms = config.get("quota.window.size.seconds") * 1000.0
        self.produce = ClientQuotaManager("Produce", "producer_byte_rate", samples, window_ms)
        self.fetch = ClientQuotaManager("Fetch", "consumer_byte_rate", samples, window_ms)
        # ClientRequestQuotaManager: at most one window of throttling at a time
        self.request = ClientQuotaManager("Request", "request_percentage", samples, window_ms,
                                          max_throttle_ms=window_ms)
        self.controller_mutation = ClientQuotaManager(
            "ControllerMutation", "controller_mutation_rate",
            config.get("controller.quota.window.num"),
            config.get("controller.quota.window.size.seconds") * 1000.0, bucket=True)
        self.managers = (self.produce, self.fetch, self.request, self.controller_mutation)
        self.active = False  # a quota has been set: dispatch goes through ``dispatch``

    def update(self, entity: QuotaEntity, values: QuotaValues) -> None:
        """The quota store's listener: ``entity``'s quotas are now ``values``."""
        for manager in self.managers:
            bound = values.get(manager.key)
            if bound is not None and not bound > 0:
                log.warning("ignoring %s=%s of %s: a quota must be greater than 0",
                            manager.key, bound, entity)
                bound = None
            manager.update(entity, bound)
        self.active = any(m.enabled for m in self.managers)

    # --- what handlers use --------------------------------------------------------------------

    def controller_mutation_quota(self, user: str, client_id: str,
                                  strict: bool) -> MutationQuota:
        """ControllerMutationQuotaManager.newQuotaFor: strict or permissive, or UNBOUNDED
        when no controller mutation quota is set."""
        manager = self.controller_mutation
        if not manager.enabled:
            return UNBOUNDED
        sensor = manager.sensor(user, client_id, _now_ms())
        if sensor.bucket is None:
            return UNBOUNDED
        return (StrictMutationQuota if strict else PermissiveMutationQuota)(sensor.bucket)

    # --- the request path ---------------------------------------------------------------------

    async def dispatch(self, ctx: RequestContext, api: Api, connection: _Peer | None,
                       encode: Encode) -> list[Any] | None:
        """Handle and encode one request under the quotas: record what it used, set its
        throttle time, mute its connection."""
        request = ctx.request
        key = request.api_key
        body = request.body
        user = connection.principal.name if connection is not None else ""
        client_id = request.client_id or ""
        follower = key == FETCH_KEY and _follower(body)
        if key == FETCH_KEY and not follower and self.fetch.enabled:
            body = self._cap_fetch(body, user, client_id)
        timed = self.request.enabled and key not in _EXEMPT and not follower
        encode_ns = 0

        def encoded_as(answer: dict[str, Any] | None) -> list[Any] | None:
            nonlocal encode_ns
            start = time.perf_counter_ns()
            try:
                return encode(request, answer)
            finally:
                encode_ns += time.perf_counter_ns() - start

        handling: Awaitable[dict[str, Any] | None] = api.handle(ctx, body)
        timer = None
        if timed:
            timer = _TimedCall(handling)
            handling = timer
        data = await handling
        now = _now_ms()
        request_ms = bandwidth_ms = 0
        if timer is not None and not (key == PRODUCE_KEY and data is None):  # acks=0: exempt
            request_ms = self.request.record(user, client_id, timer.nanos * _NANOS_TO_PERCENT,
                                             now)
        encoded: list[Any] | None = None
        if key == PRODUCE_KEY and self.produce.enabled:
            bandwidth_ms = self.produce.record(user, client_id, request.size, now)
        elif key == FETCH_KEY and not follower and self.fetch.enabled and data is not None:
            encoded = encoded_as(data)
            size = sum(len(chunk) for chunk in encoded or ())
            bandwidth_ms = self.fetch.record(user, client_id, size, now)
            if bandwidth_ms or request_ms:  # answered empty: not counted
                self.fetch.record_no_throttle(user, client_id, -size, now)
                data = {**data, "responses": []}
                encoded = None
        throttle_ms = max(request_ms, bandwidth_ms)
        if data is not None:
            # a controller mutation quota's throttle time, which the handler set
            throttle_ms = max(throttle_ms, int(data.get("throttle_time") or 0))
            if throttle_ms:
                data["throttle_time"] = throttle_ms
                encoded = None
        if throttle_ms > 0 and connection is not None:
            connection.throttle(throttle_ms)
        if encoded is None:
            encoded = encoded_as(data)
        if timer is not None:  # Kafka's network thread time: recorded, never throttled
            self.request.record_no_throttle(user, client_id, encode_ns * _NANOS_TO_PERCENT,
                                            _now_ms())
        return encoded

    def _cap_fetch(self, body: Any, user: str, client_id: str) -> Any:
        """A consumer fetch asks no more than its quota allows in one window."""
        most = self.fetch.max_value_in_window(user, client_id)
        if most is None or body.max_bytes <= most:
            return body
        max_bytes = max(int(most), 1)
        return dataclasses.replace(body, max_bytes=max_bytes,
                                   min_bytes=min(body.min_bytes, max_bytes))
