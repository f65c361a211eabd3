"""The only package that talks to the Kubernetes API, laid out as Kopf lays out its client
(kopf/_cogs/clients):

- api.py: ``Kube``, the calls (get, list, create, apply, patch, delete), and ``KubeApi``, what
  the reconcile needs of them;
- watching.py: the watch of a collection, and the wait for one object's next change;
- errors.py: what a failed call means (``ApiError`` and its ``failure``), decided once.

Import each name from the module that defines it: this package hands nothing on.
"""
