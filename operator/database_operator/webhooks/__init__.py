"""The operator's webhooks: admission (validate, mutate; Kopf's handlers) and conversion between
the API versions, served over TLS on one port (server.py) with certificates from certificates.py
and the webhook configurations of configuration.py."""
