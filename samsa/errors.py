"""Kafka error codes and the exceptions that carry one.

The code table is kio's ``ErrorCode`` (generated from Kafka's Errors.java: every code, its
name in lower case, and whether clients retry it); it is re-exported here as the one table the
project uses. ``kafka_name(code)`` gives the upper-case name Kafka's tools print.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "error", "kafka_name"]


def kafka_name(code: int) -> str:
    """Kafka's name for an error code, e.g. 3 -> UNKNOWN_TOPIC_OR_PARTITION."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


class CloseConnection(Exception):
    """Raised by the dispatcher or a handler when Kafka would close the connection (a bad
    request, a failed acks=0 produce); the connection closes without an answer."""


class KafkaError(Exception):
    """An error that maps to one Kafka error code; `str()` is the human message."""

    code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "", code: ErrorCode | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(message or self.code.name)

    @property
    def message(self) -> str:
        return str(self)


def error(code: ErrorCode, message: str) -> KafkaError:
    """A KafkaError for ``code`` with Kafka's message, for handlers that answer per item."""
    return KafkaError(message, code)


class CorruptRecordError(KafkaError):
    """A batch whose CRC or framing is broken."""

    code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaError):
    """A batch that is well formed but breaks a rule of the log."""

    code = ErrorCode.invalid_record


class RecordErrors(InvalidRecordError):
    """Records of a batch that break a rule (KIP-467): ``errors`` is (the record's index in
    its batch, why), which Produce answers as ``record_errors``; the message is Kafka's."""

    def __init__(self, errors: list[tuple[int, str]]) -> None:
        self.errors = errors
        shown = ", ".join(f"RecordError(batchIndex={index}, message='{why}')"
                          for index, why in errors[:3])
        super().__init__(f"One or more records have been rejected due to {len(errors)} record "
                         f"errors in total, and only showing the first three errors at most: "
                         f"[{shown}]")


class TimestampErrors(RecordErrors):
    """Records whose timestamps are out of the topic's range: INVALID_TIMESTAMP, Kafka's
    message for it."""

    code = ErrorCode.invalid_timestamp

    def __init__(self, errors: list[tuple[int, str]]) -> None:
        super().__init__(errors)
        self.args = ("One or more records have been rejected due to invalid timestamp",)


class OffsetOutOfRangeError(KafkaError):
    """An offset outside [log start offset, log end offset]."""

    code = ErrorCode.offset_out_of_range


class MessageTooLargeError(KafkaError):
    """A batch larger than max.message.bytes."""

    code = ErrorCode.message_too_large


class RecordListTooLargeError(KafkaError):
    """Records larger than a whole segment (segment.bytes)."""

    code = ErrorCode.record_list_too_large


class InvalidTimestampError(KafkaError):
    """A timestamp the topic's rules refuse."""

    code = ErrorCode.invalid_timestamp


class UnsupportedCompressionError(KafkaError):
    """A compression codec outside 0-4."""

    code = ErrorCode.unsupported_compression_type


class UnsupportedForMessageFormatError(KafkaError):
    """A legacy (magic 0/1) message set."""

    code = ErrorCode.unsupported_for_message_format


class InvalidConfigError(KafkaError):
    """A config key or value that is refused."""

    code = ErrorCode.invalid_config


class KafkaStorageError(KafkaError):
    """The disk failed under a log."""

    code = ErrorCode.kafka_storage_error


class InvalidProducerEpochError(KafkaError):
    """A batch from an older epoch than the partition knows for its producer id."""

    code = ErrorCode.invalid_producer_epoch


class OutOfOrderSequenceError(KafkaError):
    """A batch whose first sequence does not follow the producer's last one."""

    code = ErrorCode.out_of_order_sequence_number


class InvalidTxnStateError(KafkaError):
    """A producer's write does not fit its transaction's state."""

    code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFencedError(KafkaError):
    """A marker from an older coordinator epoch than the partition has seen."""

    code = ErrorCode.transaction_coordinator_fenced
