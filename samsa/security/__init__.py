"""Security's sans-IO core: Kafka's ACL model (``acl.py``).

No IO and no broker code: handlers and the server call into it (issue 17 wires it into the
request path)."""
