"""What the API server says when it refuses a call: `rejection` runs one that must fail and gives
its status code and message (a schema's or a CEL rule's, an admission webhook's)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException


def rejection(call: Any) -> tuple[int, str]:
    """Status code and message of an API call that must fail."""
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body or "{}")["message"]
