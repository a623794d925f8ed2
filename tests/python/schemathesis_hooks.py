"""Hooks schemathesis loads for tests/python/test_openapi.py
(`SCHEMATHESIS_HOOKS` names this file): an NDJSON body (the streaming
ingest's, `POST /v1/sessions/{id}/publish`, declared as a string of lines)
goes on the wire as the text it is, as schemathesis sends `text/plain`."""

import schemathesis

schemathesis.serializer.alias("application/x-ndjson", "text/plain")
