"""The CRD's conversion webhook: a ConversionReview (v1) answered with api/conversion.py's
mapping, or with a Failure that names the Database and the field."""

from __future__ import annotations

from typing import Any

from database_operator.api.conversion import ConversionError, convert
from database_operator.manifest import Manifest


def review(body: Manifest) -> Manifest:
    """The answer to a ConversionReview: every object converted, or a Failure that says why."""
    request = body.get("request") or {}
    desired = str(request.get("desiredAPIVersion", ""))
    response: dict[str, Any] = {"uid": request.get("uid", ""), "convertedObjects": []}
    for obj in request.get("objects") or []:
        try:
            response["convertedObjects"].append(convert(obj, desired))
        except ConversionError as error:
            meta = obj.get("metadata") or {}
            where = f"Database {meta.get('namespace', '')}/{meta.get('name', '')}: "
            response["convertedObjects"] = []
            response["result"] = {"status": "Failure", "message": where + str(error)}
            break
    else:
        response["result"] = {"status": "Success"}
    return {
        "apiVersion": body.get("apiVersion", "apiextensions.k8s.io/v1"),
        "kind": "ConversionReview",
        "response": response,
    }
