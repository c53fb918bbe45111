"""Security's sans-IO core: Kafka's ACL model (``acl.py``), the ACL authorizer
(``authorizer.py``), and Kafka's ZooKeeper storage format of ACLs (``acl_store.py``).

No IO and no broker code: handlers and the server call into it (issue 17 wires it into the
request path)."""

from .authorizer import AclAuthorizer, authorizer_from_config

__all__ = ["AclAuthorizer", "authorizer_from_config"]
