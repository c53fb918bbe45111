"""Security's core, beside records/: listeners and TLS contexts (``listeners.py``,
``ssl_factory.py``, ``channel.py``), principals (``principal.py``), throwaway CAs for the
embedded broker and tests (``ca.py``), SASL's mechanisms, JAAS configs and each listener's SASL
settings (``sasl/``), Kafka's ACL model (``acl.py``), the ACL authorizer (``authorizer.py``) and
Kafka's ZooKeeper storage format of ACLs (``acl_store.py``).

No broker code: the server and the handlers call into it."""

from .authorizer import AclAuthorizer, authorizer_from_config

__all__ = ["AclAuthorizer", "authorizer_from_config"]
