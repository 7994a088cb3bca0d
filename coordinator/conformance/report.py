"""The kit's report (pure): a summary, a document for JSON, and JUnit XML for CI systems."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from typing import Any

from coordinator.conformance.runner import CaseResult, Status


def summary(results: Sequence[CaseResult]) -> dict[str, int]:
    counts = Counter(r.status for r in results)
    return {s.value: counts.get(s, 0) for s in Status}


def summary_line(results: Sequence[CaseResult], engine: str) -> str:
    s = summary(results)
    return (
        f"{engine}: {len(results)} cases: {s['passed']} passed, {s['failed']} failed,"
        f" {s['skipped']} skipped"
        + (f", {known} known differences" if (known := s[Status.KNOWN_DIFFERENCE]) else "")
    )


def result_row(r: CaseResult) -> dict[str, Any]:
    """One case as a table row or JSON object."""
    return {
        "case": r.case.name,
        "status": r.status.value,
        "seconds": r.seconds,
        "spec": r.case.spec,
        "capabilities": sorted(r.case.capabilities),
        "rules": list(r.rules),
        "transaction": r.transaction,
        "detail": r.summary(),
        "source": r.case.source,
    }


def document(results: Sequence[CaseResult], engine: str) -> dict[str, Any]:
    return {
        "engine": engine,
        "summary": summary(results),
        "cases": [result_row(r) for r in results],
    }


def junit_xml(results: Sequence[CaseResult], engine: str) -> str:
    """One JUnit ``testsuite`` with a ``testcase`` per case (failure / skipped elements)."""
    s = summary(results)
    suite = ET.Element(
        "testsuite",
        {
            "name": "odf-engine-conformance",
            "tests": str(len(results)),
            "failures": str(s["failed"]),
            "errors": "0",
            "skipped": str(s["skipped"] + s[Status.KNOWN_DIFFERENCE]),
            "time": f"{sum(r.seconds for r in results):.3f}",
        },
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", {"name": "engine", "value": engine})
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"odf.conformance.{_group(r)}",
                "name": r.case.name,
                "time": f"{r.seconds:.3f}",
            },
        )
        if r.status is Status.FAILED:
            failure = ET.SubElement(
                case, "failure", {"message": ", ".join(r.rules), "type": "conformance"}
            )
            failure.text = f"spec: {r.case.spec}\n{r.summary()}"
        elif r.status is Status.SKIPPED:
            ET.SubElement(case, "skipped", {"message": r.reason})
        elif r.status is Status.KNOWN_DIFFERENCE:
            ET.SubElement(case, "skipped", {"message": r.summary(), "type": "known-difference"})
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _group(r: CaseResult) -> str:
    return r.case.kind.value.replace("-", "_")
