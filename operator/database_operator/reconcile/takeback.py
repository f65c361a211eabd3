"""Writing one child: server-side apply, and taking back the list elements another field
manager keeps in it, so that the child ends up as the operator wrote it (or it says why not)."""

from __future__ import annotations

from database_operator.compare import difference, dotted, list_takebacks, needs_write, version_test
from database_operator.kube.api import KubeApi
from database_operator.kube.errors import ApiError
from database_operator.manifest import Manifest
from database_operator.reconcile.result import Result


class ChildNotConvergedError(Exception):
    """A child still differs after being written: our comparison and the API server disagree.
    Writing it again would change nothing, so the Database fails with ChildNotConverged. No API
    call failed: every write was accepted."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @classmethod
    def of(cls, written: Manifest, manifest: Manifest) -> ChildNotConvergedError:
        """The error naming the first field ``written`` does not hold as ``manifest`` has it."""
        path, have, want = difference(written, manifest) or ((), None, None)
        field = dotted(path) or "a field"
        if manifest["kind"] == "Secret":  # never a secret value in a status, Event or log
            return cls(f"{_where(manifest)} keeps another value in {field} than the operator wrote")
        return cls(
            f"{_where(manifest)} keeps {field} at {have!r} after the operator wrote {want!r}: set "
            "the spec to the value the cluster keeps"
        )


async def write_child(
    kube: KubeApi, observed: Manifest | None, manifest: Manifest, uid: str, result: Result
) -> Manifest:
    """Server-side apply ``manifest``; when another field manager's list elements survive the
    apply (or make it invalid), take those lists back and apply again. Raises ApiError, with
    ``refused`` when the API server will not take our spec at all, and ChildNotConvergedError
    when it keeps another value than written."""
    try:
        applied: Manifest | None = await kube.apply(manifest)
        refusal: ApiError | None = None
    except ApiError as error:
        if observed is None or not error.refused:
            raise
        applied, refusal = None, error
    if applied is not None and not needs_write(applied, manifest, uid):
        return applied

    base = applied or observed
    assert base is not None  # an apply that created nothing raised above
    if "managedFields" not in base["metadata"]:  # from a cache, which drops them
        base = await kube.get_live(manifest["kind"], _namespace(manifest), _name(manifest)) or base
    operations = list_takebacks(base, manifest, kube.field_manager)
    if not operations:
        if refusal is not None:
            raise refusal
        raise ChildNotConvergedError.of(base, manifest)
    taken = await kube.json_patch(
        manifest["kind"],
        manifest["metadata"]["namespace"],
        manifest["metadata"]["name"],
        [version_test(base), *operations],
    )
    result.taken_back.append(manifest["kind"])
    final = await kube.apply(manifest) if refusal is not None else taken
    if needs_write(final, manifest, uid):
        raise ChildNotConvergedError.of(final, manifest)
    return final


def _namespace(manifest: Manifest) -> str:
    return str(manifest["metadata"]["namespace"])


def _name(manifest: Manifest) -> str:
    return str(manifest["metadata"]["name"])


def _where(manifest: Manifest) -> str:
    meta = manifest["metadata"]
    return f"{manifest['kind']} {meta['namespace']}/{meta['name']}"
