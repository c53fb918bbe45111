"""The REST API over HTTP: every resource's answers and error paths, with Confluent's error
codes and content type."""

from __future__ import annotations

import json

from .helpers import CONTENT_TYPE, Http, record

V1 = record("R", ("a", "int"))
V2 = record("R", ("a", "int"), ("b", "string", "x"))
OTHER = record("S", ("z", "long"))


def compact(schema: dict[str, object]) -> str:
    return json.dumps(schema, separators=(",", ":"))


def test_root_types_and_content_type(http: Http) -> None:
    answer = http.get("/")
    assert (answer.status, answer.body) == (200, {})
    assert answer.content_type == CONTENT_TYPE
    assert http.get("/schemas/types").body == ["AVRO", "JSON", "PROTOBUF"]


def test_register_and_read_back(http: Http) -> None:
    assert http.register("s", V1).body == {"id": 1}
    assert http.register("s", V1).body == {"id": 1}  # the same schema again: no new version
    assert http.register("s", V2).body == {"id": 2}
    assert http.get("/subjects").body == ["s"]
    assert http.get("/subjects/s/versions").body == [1, 2]
    assert http.get("/subjects/s/versions/1").body == {
        "subject": "s", "version": 1, "id": 1, "schema": compact(V1)}
    assert http.get("/subjects/s/versions/latest").body["version"] == 2
    assert http.get("/subjects/s/versions/-1").body["version"] == 2
    raw = http.get("/subjects/s/versions/2/schema")
    assert raw.status == 200 and json.loads(raw.text) == V2
    assert http.get("/schemas/ids/2").body == {"schema": compact(V2)}
    assert json.loads(http.get("/schemas/ids/2/schema").text) == V2
    # the same schema in another subject: the same id, its own version 1
    assert http.register("t", V2).body == {"id": 2}
    assert http.get("/schemas/ids/2/subjects").body == ["s", "t"]
    assert http.get("/schemas/ids/2/versions").body == [
        {"subject": "s", "version": 2}, {"subject": "t", "version": 1}]
    assert http.get("/schemas/ids/2?subject=t").status == 200
    assert http.get("/subjects?subjectPrefix=t").body == ["t"]
    # whitespace and formatting do not make another schema
    assert http.register("s", json.dumps(V1, indent=4)).body == {"id": 1}


def test_lookup(http: Http) -> None:
    http.register("s", V1)
    found = http.post("/subjects/s", {"schema": json.dumps(V1)})
    assert found.body == {"subject": "s", "version": 1, "id": 1, "schema": compact(V1)}
    missing = http.post("/subjects/s", {"schema": json.dumps(OTHER)})
    assert (missing.status, missing.error_code) == (404, 40403)
    nobody = http.post("/subjects/nobody", {"schema": json.dumps(V1)})
    assert (nobody.status, nobody.error_code) == (404, 40401)


def test_not_found_errors(http: Http) -> None:
    http.register("s", V1)
    cases = {
        "/subjects/nobody/versions": 40401,
        "/subjects/nobody/versions/1": 40401,
        "/subjects/s/versions/7": 40402,
        "/schemas/ids/99": 40403,
        "/schemas/ids/99/schema": 40403,
        "/schemas/ids/99/subjects": 40403,
        "/schemas/ids/99/versions": 40403,
        "/schemas/ids/1?subject=other": 40403,
        "/config/s": 40408,
        "/mode/s": 40409,
    }
    for path, code in cases.items():
        answer = http.get(path)
        assert (answer.status, answer.error_code) == (404, code), path
        assert isinstance(answer.body["message"], str) and answer.body["message"], path
    route = http.get("/no/such/route")
    assert (route.status, route.error_code) == (404, 404)
    assert http.get("/schemas/ids/abc").status == 404
    method = http.call("PATCH", "/subjects")
    assert (method.status, method.error_code) == (405, 405)


def test_invalid_versions(http: Http) -> None:
    http.register("s", V1)
    for version in ("0", "-2", "abc", "2147483648", "1.5"):
        answer = http.get(f"/subjects/s/versions/{version}")
        assert (answer.status, answer.error_code) == (422, 42202), version
    answer = http.delete("/subjects/s/versions/zero")
    assert (answer.status, answer.error_code) == (422, 42202)


def test_invalid_schemas(http: Http) -> None:
    bad = [
        ({"schema": "not json"}, None),
        ({"schema": json.dumps({"type": "record", "name": "R"})}, None),  # no fields
        ({"schema": json.dumps({"type": "nosuchtype"})}, None),
        ({"schema": ""}, None),
        ({}, None),
        ({"schema": json.dumps({"type": 5})}, "JSON"),
        ({"schema": "message { int32 a = 1; }"}, "PROTOBUF"),
        ({"schema": "syntax = \"proto3\"; message M { int32 a = 1; string b = 1; }"},
         "PROTOBUF"),
        ({"schema": json.dumps(V1)}, "XML"),
        ({"schema": json.dumps(V1), "references": [
            {"name": "x", "subject": "nobody", "version": 1}]}, None),
    ]
    for body, schema_type in bad:
        if schema_type is not None:
            body = {**body, "schemaType": schema_type}
        answer = http.post("/subjects/s/versions", body)
        assert (answer.status, answer.error_code) == (422, 42201), body
    malformed = http.post("/subjects/s/versions", raw=b"{not json")
    assert (malformed.status, malformed.error_code) == (400, 400)
    assert http.get("/subjects").body == []


def test_config(http: Http) -> None:
    assert http.get("/config").body == {"compatibilityLevel": "BACKWARD"}
    assert http.put("/config", {"compatibility": "full"}).body == {"compatibility": "FULL"}
    assert http.get("/config").body == {"compatibilityLevel": "FULL"}
    assert http.put("/config/s", {"compatibility": "NONE"}).body == {"compatibility": "NONE"}
    assert http.get("/config/s").body == {"compatibilityLevel": "NONE"}
    assert http.get("/config/t?defaultToGlobal=true").body == {"compatibilityLevel": "FULL"}
    bad = http.put("/config", {"compatibility": "SIDEWAYS"})
    assert (bad.status, bad.error_code) == (422, 42203)
    assert http.put("/config/s", {}).error_code == 42203
    assert http.delete("/config/s").body == {"compatibilityLevel": "NONE"}
    assert http.get("/config/s").error_code == 40408
    assert http.delete("/config/nobody").error_code == 40401
    assert http.delete("/config").body == {"compatibilityLevel": "FULL"}
    assert http.get("/config").body == {"compatibilityLevel": "BACKWARD"}


def test_compatibility_resource(http: Http) -> None:
    # no subject yet: anything is compatible with "latest"; a numbered version is missing
    latest = http.post("/compatibility/subjects/s/versions/latest", {"schema": json.dumps(V1)})
    assert latest.body == {"is_compatible": True}
    assert http.post("/compatibility/subjects/s/versions/1",
                     {"schema": json.dumps(V1)}).error_code == 40401
    http.register("s", V1)
    good = http.post("/compatibility/subjects/s/versions/latest", {"schema": json.dumps(V2)})
    assert good.body == {"is_compatible": True}
    breaking = record("R", ("a", "string"))
    bad = http.post("/compatibility/subjects/s/versions/1?verbose=true",
                    {"schema": json.dumps(breaking)})
    assert bad.body["is_compatible"] is False and bad.body["messages"]
    assert http.post("/compatibility/subjects/s/versions",
                     {"schema": json.dumps(breaking)}).body == {"is_compatible": False}
    assert http.post("/compatibility/subjects/s/versions/2",
                     {"schema": json.dumps(V2)}).error_code == 40402
    assert http.post("/compatibility/subjects/s/versions/x",
                     {"schema": json.dumps(V2)}).error_code == 42202
    assert http.post("/compatibility/subjects/s/versions/latest",
                     {"schema": "{"}).error_code == 42201


def test_incompatible_registration(http: Http) -> None:
    http.register("s", V1)
    answer = http.register("s", record("R", ("a", "int"), ("b", "string")))
    assert (answer.status, answer.error_code) == (409, 409)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in answer.body["message"]
    assert http.get("/subjects/s/versions").body == [1]


def test_json_and_protobuf_subjects(http: Http) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    registered = http.register("j", schema, "JSON")
    assert registered.status == 200
    assert http.get("/subjects/j/versions/1").body["schemaType"] == "JSON"
    assert http.get(f"/schemas/ids/{registered.body['id']}").body["schemaType"] == "JSON"
    proto = 'syntax = "proto3";\npackage shop;\n\nmessage Item {\n  string name = 1;\n}\n'
    answer = http.register("p", proto, "PROTOBUF")
    assert answer.status == 200
    found = http.get("/subjects/p/versions/latest").body
    assert found["schemaType"] == "PROTOBUF" and "message Item" in found["schema"]
    # the same text is not the same schema across types
    assert http.get("/schemas/ids/1").body != http.get("/schemas/ids/2").body


def test_references(http: Http) -> None:
    address = {"type": "record", "name": "Address", "namespace": "shop",
               "fields": [{"name": "street", "type": "string"}]}
    assert http.register("address", address).status == 200
    customer = {"type": "record", "name": "Customer", "namespace": "shop",
                "fields": [{"name": "home", "type": "shop.Address"}]}
    refs = [{"name": "shop.Address", "subject": "address", "version": 1}]
    answer = http.register("customer", customer, references=refs)
    assert answer.status == 200, answer.body
    got = http.get("/subjects/customer/versions/1").body
    assert got["references"] == refs
    assert http.get(f"/schemas/ids/{answer.body['id']}").body["references"] == refs
    assert http.get("/subjects/address/versions/1/referencedby").body == [answer.body["id"]]
    # without the reference the type is unknown
    assert http.register("customer2", customer).error_code == 42201
    # a referenced version cannot be deleted
    refused = http.delete("/subjects/address/versions/1")
    assert (refused.status, refused.error_code) == (422, 42206)
    assert http.delete("/subjects/address").error_code == 42206


def test_json_schema_references(http: Http) -> None:
    address = {"type": "object", "properties": {"street": {"type": "string"}}}
    assert http.register("address", address, "JSON").status == 200
    refs = [{"name": "address.json", "subject": "address", "version": 1}]
    customer = {"type": "object", "properties": {"home": {"$ref": "address.json"}}}
    first = http.register("customer", customer, "JSON", references=refs)
    assert first.status == 200, first.body
    assert http.get("/subjects/customer/versions/1").body["references"] == refs
    # a referenced schema's narrowing is seen through the $ref: a street that must be short
    narrowed = {"type": "object", "properties": {"street": {"type": "string",
                                                            "maxLength": 3}}}
    assert http.put("/config/address", {"compatibility": "NONE"}).status == 200
    assert http.register("address", narrowed, "JSON").status == 200
    refs2 = [{"name": "address.json", "subject": "address", "version": 2}]
    refused = http.register("customer", customer, "JSON", references=refs2)
    assert (refused.status, refused.error_code) == (409, 409)
    assert "MAXLENGTH" in refused.body["message"]


def test_invalid_subject(http: Http) -> None:
    for subject in ("%20", "bad%01name"):
        answer = http.register(subject, V1)
        assert (answer.status, answer.error_code) == (422, 42208), subject
        assert http.put(f"/config/{subject}", {"compatibility": "NONE"}).error_code == 42208
    assert http.get("/subjects").body == []
