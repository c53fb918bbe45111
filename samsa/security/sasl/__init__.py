"""SASL as Kafka speaks it, without I/O: the mechanisms' server sides (``plain``, ``scram``,
``oauthbearer``) and the client sides the broker uses toward other brokers, JAAS
configuration (``jaas``), and what each SASL listener offers (``listener``).

The exchange itself (SaslHandshake, SaslAuthenticate, the states before the first other
request) belongs to the connection: ``samsa.server.sasl``."""
