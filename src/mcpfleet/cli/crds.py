"""`mcpfleet crds`: write the CRDs and the field references generated from the resource models (and
from the proxy's config model)."""

from __future__ import annotations

from pathlib import Path

import typer


def crds(
    output: Path = typer.Option(
        Path("deploy/crds"), "--output", "-o", help="Directory for the CRD YAML files."
    ),
    reference: Path | None = typer.Option(
        Path("docs/reference/api.md"), "--reference", help="Markdown field reference to write ('' to skip)."
    ),
    proxy_reference: Path | None = typer.Option(
        Path("docs/reference/proxy-config.md"),
        "--proxy-reference",
        help="Markdown field reference of the proxy's config file to write ('' to skip).",
    ),
    chart: Path | None = typer.Option(
        Path("deploy/helm/mcpfleet-crds/files/crds"),
        "--chart",
        help="The mcpfleet-crds Helm chart's CRD directory, written with the same files ('' to skip).",
    ),
) -> None:
    """Generate the CustomResourceDefinitions (and docs field reference) from the pydantic models.

    Examples:

    \b
      mcpfleet crds
      mcpfleet crds --output /tmp/crds --reference ''
    """
    from mcpfleet.api.crdgen import write_crds

    # typer turns '' into Path('.'): both mean "skip", never "write into the current directory".
    target = reference if reference and str(reference) not in ("", ".") else None
    copies = [chart] if chart and str(chart) not in ("", ".") else []
    for path in write_crds(output, target, copies):
        typer.echo(f"wrote {path}")
    if proxy_reference and str(proxy_reference) not in ("", "."):
        from mcpfleet.proxy.reference import render_reference

        proxy_reference.parent.mkdir(parents=True, exist_ok=True)
        proxy_reference.write_text(render_reference())
        typer.echo(f"wrote {proxy_reference}")
