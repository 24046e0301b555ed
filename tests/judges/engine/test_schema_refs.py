"""A json_schema is data: its references stay inside the document, and judging never fetches one.

A loopback server stands where a remote reference points and counts who connects; it answers at once
(an empty schema), so a fetch shows up as a count rather than as a hang.
"""

import dataclasses
import socketserver
import threading

import pytest

from judges.engine import JudgeConfig, judge_case

from .factories import contract_config, tool_case


class _Counting(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.server.connections += 1  # type: ignore[attr-defined]
        self.request.recv(65536)  # the request, read so closing does not reset the connection
        self.request.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")


@pytest.fixture
def listener():
    """A loopback server that records each connection made to it."""
    server = socketserver.TCPServer(("127.0.0.1", 0), _Counting)
    server.connections = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def _url(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/schema"


def _schema_config(schema):
    return contract_config("json_schema", json_schema=schema)


@pytest.mark.parametrize("place", ["root", "property", "defs", "dynamic", "examples"])
def test_it_refuses_a_reference_that_leaves_the_schema(listener, place):
    url = _url(listener)
    schema = {
        "root": {"$ref": url},
        "property": {"type": "object", "properties": {"order": {"$ref": url}}},
        "defs": {"$defs": {"order": {"$ref": url}}, "$ref": "#/$defs/order"},
        "dynamic": {"$dynamicRef": url},
        # Not a schema keyword's place, but a local reference may point there ("#/examples/0").
        "examples": {"examples": [{"$ref": url}]},
    }[place]

    with pytest.raises(ValueError, match=r"^json_schema: the reference '" + url + "' .* leaves the schema"):
        JudgeConfig.from_dict(_schema_config(schema))
    assert listener.connections == 0


def test_it_refuses_a_metaschema_jsonschema_does_not_ship():
    with pytest.raises(ValueError, match=r"^json_schema: \$schema 'http://example.com/my-draft' is not"):
        JudgeConfig.from_dict(_schema_config({"$schema": "http://example.com/my-draft", "type": "object"}))


def test_it_knows_the_drafts_jsonschema_ships(listener):
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "required": ["order_id"]}
    cfg = JudgeConfig.from_dict(_schema_config(schema))

    assert judge_case(tool_case(output='{"order_id": "ORD-101"}'), cfg, 1).outcome == "pass"
    assert judge_case(tool_case(output="{}"), cfg, 1).outcome == "fail"


def test_a_remote_reference_that_slipped_past_is_a_failed_check_not_a_request(listener):
    # As a config stored before the refusal would be: the validated fields with a remote schema put back.
    valid = JudgeConfig.from_dict(_schema_config({"type": "object"}))
    remote = {"type": "object", "properties": {"order": {"$ref": _url(listener)}}}
    stored = dataclasses.replace(valid, json_schema=remote)

    j = judge_case(tool_case(output='{"order": 1}'), stored, 1)

    assert listener.connections == 0
    assert j.outcome == "fail"
    assert j.checks == [{
        "name": "json_schema", "passed": False,
        "detail": f"the schema's reference '{_url(listener)}' does not resolve within the schema",
    }]


@pytest.mark.parametrize("output, outcome, detail", [
    ('{"order_id": "ORD-101"}', "pass", "the answer validates against the schema"),
    ('{"order_id": "101"}', "fail", "1 schema error(s); at order_id: '101' does not match '^ORD-'"),
])
def test_a_local_reference_still_works(output, outcome, detail):
    schema = {
        "$defs": {"order_id": {"type": "string", "pattern": "^ORD-"}},
        "type": "object",
        "properties": {"order_id": {"$ref": "#/$defs/order_id"}},
    }

    j = judge_case(tool_case(output=output), _schema_config(schema), 1)

    assert (j.outcome, j.checks[0]["detail"]) == (outcome, detail)


@pytest.mark.parametrize("schema, says", [
    ({"type": "object", "properties": {"order": {"$ref": "#/$defs/missing"}}},
     "the reference '#/$defs/missing' ($ref at /properties/order) does not resolve within the schema"),
    ({"$defs": {"a": {"type": "string"}}, "items": {"$ref": "#/$defs/a/nowhere"}},
     "the reference '#/$defs/a/nowhere' ($ref at /items) does not resolve"),
    ({"$dynamicRef": "#no-such-anchor"}, "the reference '#no-such-anchor' ($dynamicRef at /) does not resolve"),
])
def test_a_local_reference_that_does_not_resolve_refuses_the_config(schema, says):
    with pytest.raises(ValueError, match="^json_schema: ") as refused:
        JudgeConfig.from_dict(_schema_config(schema))
    assert says in str(refused.value)


@pytest.mark.parametrize("schema", [
    {"$defs": {"a": {"$anchor": "order", "type": "string"}}, "properties": {"x": {"$ref": "#order"}}},
    {"$defs": {"a~b": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a~0b"}}},
    {"$defs": {"inner": {"$id": "urn:inner", "$defs": {"n": {"type": "integer"}}, "items": {"$ref": "#/$defs/n"}}},
     "properties": {"x": {"$ref": "#/$defs/inner"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": {"type": "string"}},
     "properties": {"x": {"$ref": "#/definitions/a"}}},
])
def test_local_references_that_resolve_are_kept(schema):
    assert JudgeConfig.from_dict(_schema_config(schema)).json_schema == schema
