"""The registry's errors: an HTTP status and Confluent's error code, answered as
``{"error_code": ..., "message": ...}``."""

from __future__ import annotations

# Confluent Schema Registry's error codes (the HTTP status is the code's first three digits)
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
SCHEMA_VERSION_SOFT_DELETED = 40406
SCHEMA_VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_DOES_NOT_MATCH = 42207
INVALID_SUBJECT = 42208
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
REQUEST_FORWARDING_FAILED = 50003
UNKNOWN_LEADER = 50004


class RegistryError(Exception):
    """A request the registry refuses: answered with ``status`` and ``{"error_code",
    "message"}``."""

    def __init__(self, error_code: int, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.status = status if status is not None else int(str(error_code)[:3])

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: int) -> RegistryError:
    return RegistryError(VERSION_NOT_FOUND,
                         f"Version {version} not found for subject '{subject}'.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    if schema_id is None:
        return RegistryError(SCHEMA_NOT_FOUND, "Schema not found")
    return RegistryError(SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(
        INVALID_VERSION,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        "between [1, 2^31-1] and the string \"latest\"")


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(INVALID_SCHEMA, f"Invalid schema: {message}")


def not_permitted(message: str) -> RegistryError:
    return RegistryError(OPERATION_NOT_PERMITTED, message)
