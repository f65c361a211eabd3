"""database-operator: a Kopf operator that runs a database for each Database custom resource."""

__version__ = "0.1.0"
