"""Schemathesis hooks for sitemapd's CI: how to send an application/x-ndjson body.

The OpenAPI document describes an NDJSON body as an array of entries, one entry a line on the wire.
"""

import json

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    items = value if isinstance(value, list) else [value]
    return "".join(json.dumps(item) + "\n" for item in items).encode("utf-8")
