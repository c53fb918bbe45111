"""Soft and hard deletes of subjects and versions, and the modes (READWRITE, READONLY,
IMPORT), through the REST API."""

from __future__ import annotations

from .helpers import Http, record

V1 = record("R", ("a", "int"))
V2 = record("R", ("a", "int"), ("b", "string", "x"))
V3 = record("R", ("a", "int"), ("b", "string", "x"), ("c", "long", 0))


def test_soft_then_hard_delete_of_a_subject(http: Http) -> None:
    http.register("s", V1)
    http.register("s", V2)
    hard_first = http.delete("/subjects/s?permanent=true")
    assert (hard_first.status, hard_first.error_code) == (404, 40405)
    assert http.delete("/subjects/s").body == [1, 2]
    assert http.get("/subjects").body == []
    assert http.get("/subjects?deleted=true").body == ["s"]
    assert http.get("/subjects/s/versions").error_code == 40401
    assert http.get("/subjects/s/versions?deleted=true").body == [1, 2]
    assert http.get("/subjects/s/versions/1?deleted=true").body["id"] == 1
    assert http.get("/subjects/s/versions/1").error_code == 40401
    # ids still resolve (data written with them must stay readable)
    assert http.get("/schemas/ids/1").status == 200
    assert http.post("/subjects/s", {"schema": '{"type":"int"}'}).error_code == 40403
    assert http.post("/subjects/s?deleted=true", {
        "schema": http.get("/schemas/ids/1").body["schema"]}).body["version"] == 1
    again = http.delete("/subjects/s")
    assert (again.status, again.error_code) == (404, 40404)
    assert http.delete("/subjects/s?permanent=true").body == [1, 2]
    assert http.get("/subjects?deleted=true").body == []
    assert http.get("/schemas/ids/1").error_code == 40403
    assert http.delete("/subjects/s").error_code == 40401
    assert http.delete("/subjects/s?permanent=true").error_code == 40401


def test_registering_after_a_soft_delete_continues_the_versions(http: Http) -> None:
    http.register("s", V1)
    http.delete("/subjects/s")
    assert http.register("s", V1).body == {"id": 1}
    assert http.get("/subjects/s/versions").body == [2]
    assert http.get("/subjects/s/versions?deleted=true").body == [1, 2]


def test_soft_then_hard_delete_of_a_version(http: Http) -> None:
    for schema in (V1, V2, V3):
        http.register("s", schema)
    not_soft = http.delete("/subjects/s/versions/2?permanent=true")
    assert (not_soft.status, not_soft.error_code) == (404, 40407)
    assert http.delete("/subjects/s/versions/2").body == 2
    assert http.get("/subjects/s/versions").body == [1, 3]
    assert http.get("/subjects/s/versions/2").error_code == 40402
    assert http.get("/subjects/s/versions/2?deleted=true").body["id"] == 2
    soft_again = http.delete("/subjects/s/versions/2")
    assert (soft_again.status, soft_again.error_code) == (404, 40406)
    assert http.delete("/subjects/s/versions/2?permanent=true").body == 2
    assert http.get("/subjects/s/versions?deleted=true").body == [1, 3]
    assert http.delete("/subjects/s/versions/2").error_code == 40402
    assert http.delete("/subjects/s/versions/latest").body == 3
    assert http.get("/subjects/s/versions/latest").body["version"] == 1
    assert http.delete("/subjects/nobody/versions/1").error_code == 40401


def test_deleted_versions_leave_the_compatibility_check(http: Http) -> None:
    http.register("s", V1)
    http.delete("/subjects/s/versions/1")
    # against nothing live, anything goes
    assert http.register("s", record("R", ("a", "string"))).status == 200


def test_modes(http: Http) -> None:
    assert http.get("/mode").body == {"mode": "READWRITE"}
    http.register("s", V1)
    assert http.put("/mode/s", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    assert http.get("/mode/s").body == {"mode": "READONLY"}
    refused = http.register("s", V2)
    assert (refused.status, refused.error_code) == (422, 42205)
    assert http.delete("/subjects/s").error_code == 42205
    assert http.delete("/subjects/s/versions/1").error_code == 42205
    assert http.register("t", V1).status == 200  # other subjects are still writable
    assert http.get("/subjects/s/versions/1").status == 200  # reads are fine
    assert http.delete("/mode/s").body == {"mode": "READONLY"}
    assert http.get("/mode/s").error_code == 40409
    assert http.get("/mode/s?defaultToGlobal=true").body == {"mode": "READWRITE"}
    assert http.register("s", V2).status == 200
    assert http.put("/mode", {"mode": "READONLY"}).status == 200
    assert http.register("u", V1).error_code == 42205
    bad = http.put("/mode", {"mode": "SIDEWAYS"})
    assert (bad.status, bad.error_code) == (422, 42204)
    assert http.put("/mode", {"mode": "READWRITE"}).status == 200
    assert http.delete("/mode/nobody").error_code == 40401


def test_import_mode(http: Http) -> None:
    # an explicit id is for import mode only
    plain = http.register("s", V1, id=42, version=1)
    assert (plain.status, plain.error_code) == (422, 42205)
    http.register("s", V1)
    assert http.put("/mode", {"mode": "IMPORT"}).error_code == 42205  # subjects exist
    assert http.put("/mode/fresh", {"mode": "IMPORT"}).body == {"mode": "IMPORT"}
    imported = http.register("fresh", V2, id=100, version=5)
    assert imported.body == {"id": 100}
    assert http.get("/subjects/fresh/versions").body == [5]
    assert http.get("/schemas/ids/100").status == 200
    # no compatibility check while importing
    assert http.register("fresh", record("R", ("a", "string")), id=101, version=6).status == 200
    # an id already holding another schema is not overwritten
    clash = http.register("fresh", V3, id=100, version=7)
    assert (clash.status, clash.error_code) == (422, 42205)
    assert http.put("/mode/fresh", {"mode": "READWRITE"}).status == 200
    # ids go on after the highest imported one
    assert http.register("next", V3).body == {"id": 102}
    assert http.put("/mode?force=true", {"mode": "IMPORT"}).body == {"mode": "IMPORT"}
