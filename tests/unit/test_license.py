"""One license, said the same way everywhere: LICENSE is the Apache License 2.0 text, and the
package metadata, the chart and the image name it by the same SPDX identifier."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SPDX = "Apache-2.0"
#: sha256 of https://www.apache.org/licenses/LICENSE-2.0.txt, appendix included.
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_file_is_the_standard_apache_2_0_text() -> None:
    text = (ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0_SHA256


def test_package_chart_and_image_name_the_same_license() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == SPDX
    assert project["license-files"] == ["LICENSE"]
    chart = yaml.safe_load((ROOT / "helm" / "database-operator" / "Chart.yaml").read_text())
    assert chart["annotations"]["artifacthub.io/license"] == SPDX
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(rf'org\.opencontainers\.image\.licenses="{re.escape(SPDX)}"', dockerfile)
